# SPDX-License-Identifier: Apache-2.0
"""Run inside a sandbox by test_code_service.py: one HTTP request to the code-interpreter service.

    interp_client.py call METHOD PATH [JSON]     prints {status, content_type, lines|body}
    interp_client.py abandon POST /execute JSON  sends the request, waits until the execution
                                                 started, then closes the connection (E2B's
                                                 client cancels that way) and prints {abandoned}
    interp_client.py pair POST /execute JSON1 FILE JSON2
                                                 sends JSON1, waits until FILE exists (JSON1's
                                                 code makes it), sends JSON2 while JSON1 runs;
                                                 prints [answer1, answer2]
Standard library only; the service listens on 127.0.0.1:49999.
"""

import http.client
import json
import os
import socket
import sys
import threading
import time

PORT = 49999


def call(method, path, body):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=270)
    try:
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
    except OSError as e:
        return {"status": 0, "error": str(e)}
    data = r.read().decode()
    out = {"status": r.status, "content_type": r.getheader("Content-Type")}
    if out["content_type"] == "application/x-ndjson":
        out["lines"] = [json.loads(ln) for ln in data.splitlines() if ln]
    else:
        out["body"] = data
    return out


def abandon(path, body):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=120)
    data = body.encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
    got = b""
    while b"number_of_executions" not in got:
        chunk = s.recv(4096)
        if not chunk:
            return {"abandoned": False, "got": got.decode()}
        got += chunk
    s.close()
    return {"abandoned": True}


def pair(method, path, first, flag, second):
    answers = [None, None]

    def run_first():
        answers[0] = call(method, path, first)

    t = threading.Thread(target=run_first)
    t.start()
    while not os.path.exists(flag) and t.is_alive():
        time.sleep(0.02)
    answers[1] = call(method, path, second)
    t.join()
    return answers


def main():
    mode, method, path = sys.argv[1:4]
    body = sys.argv[4] if len(sys.argv) > 4 else None
    if mode == "pair":
        out = pair(method, path, body, sys.argv[5], sys.argv[6])
    elif mode == "abandon":
        out = abandon(path, body)
    else:
        out = call(method, path, body)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
