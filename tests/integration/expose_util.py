# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by tests/integration/test_expose.py and tests/security/test_expose_boundary.py:
an isolad with an exposure listener, servers inside a sandbox, raw HTTP and WebSocket."""

import base64
import hashlib
import os
import socket
import struct
import time

from pathlib import Path


def _top_conftest():
    """tests/conftest.py (its Isolad class); `import conftest` from tests/security would give
    that directory's own conftest (the module names collide)."""
    import importlib.util
    import sys
    want = str(Path(__file__).resolve().parents[1] / "conftest.py")
    for m in list(sys.modules.values()):
        if getattr(m, "__file__", None) and str(Path(m.__file__).resolve()) == want:
            return m
    spec = importlib.util.spec_from_file_location("isola_top_conftest", want)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


conftest = top_conftest = _top_conftest()

MAX_CONNS = 4
HELLO = b"hello from inside the sandbox\n"

# A tiny stdlib server for what `python3 -m http.server` does not do: a WebSocket echo, a
# streamed response released by a file the test creates, and an echo of the request head as
# the inside server received it. Every request line goes to /srv/app.log.
APP = r'''
import base64, hashlib, os, socket, socketserver, struct, sys, time

LOG = "/srv/app.log"

def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")

class H(socketserver.StreamRequestHandler):
    def handle(self):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            b = self.rfile.readline()
            if not b:
                return
            head += b
        line = head.split(b"\r\n", 1)[0].decode()
        log(line)
        path = line.split(" ")[1]
        hdrs = {}
        for l in head.decode().split("\r\n")[1:]:
            if ":" in l:
                k, v = l.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        if path == "/ws":
            key = hdrs["sec-websocket-key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" % acc).encode())
            while True:
                h = self.rfile.read(2)
                if len(h) < 2:
                    return
                op, n = h[0] & 15, h[1] & 127
                if n == 126:
                    n = struct.unpack(">H", self.rfile.read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self.rfile.read(8))[0]
                mask = self.rfile.read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00")
                    return
                out = b"echo:" + data
                hdr = bytes([0x80 | op])
                hdr += bytes([len(out)]) if len(out) < 126 else b"\x7e" + struct.pack(">H", len(out))
                self.wfile.write(hdr + out)
                self.wfile.flush()
        elif path == "/stream":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
            self.wfile.write(b"7\r\nchunk1\n\r\n")
            self.wfile.flush()
            deadline = time.time() + 30
            while not os.path.exists("/srv/go") and time.time() < deadline:
                time.sleep(0.02)
            self.wfile.write(b"7\r\nchunk2\n\r\n0\r\n\r\n")
            self.wfile.flush()
        elif path.startswith("/reject"):
            # answers without reading the body, and closes
            self.wfile.write(b"HTTP/1.0 413 Payload Too Large\r\nContent-Length: 4\r\n\r\nnope")
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        elif "echo" in path:
            body = head
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif path.startswith("/upload"):
            n = int(hdrs.get("content-length", "0"))
            data = self.rfile.read(n)
            body = hashlib.sha256(data).hexdigest().encode()
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        else:
            self.wfile.write(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")

class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def raw(port, data, timeout=20.0, shut=False):
    """Sends bytes to the exposure listener and returns everything it answered until close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def status_of(resp):
    assert resp.startswith(b"HTTP/1."), resp[:200]
    return int(resp.split(b" ", 2)[1])


def body_of(resp):
    return resp.split(b"\r\n\r\n", 1)[1]


def req(path, host, token=None, extra="", method="GET"):
    h = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    if token:
        h += f"X-Isola-Access-Token: {token}\r\n"
    return (h + extra + "\r\n").encode()


class Exposer:
    """An isolad with an exposure listener, and helpers around it."""

    def __init__(self, bind="127.0.0.1", extra_args=()):
        self.xport = conftest.free_port()
        self.d = conftest.Isolad(extra_args=["--expose-listen", f"{bind}:{self.xport}",
                                             "--expose-max-conns", str(MAX_CONNS)] +
                                 list(extra_args))
        self.api = self.d.client(timeout=60)

    def host(self, sid, port):
        return f"{port}-{sid}.isola.localhost:{self.xport}"

    def expose(self, sid, port, public=False, status=201):
        r = self.api.request("POST", f"/v1/sandboxes/{sid}/ports",
                             json={"port": port, "public": public})
        assert r.status == status, r
        return r.json()

    def get(self, sid, port, path, token=None, extra=""):
        return raw(self.xport, req(path, self.host(sid, port), token, extra))

    def close(self):
        return self.d.discard_problems()


def start_servers(api, sid):
    """python3 -m http.server on 8000 (files in /srv/www, log /srv/http.log) and the app on
    8001; returns when both answer inside."""
    api.sh(sid, "mkdir -p /srv/www")
    api.write_file(sid, "/srv/www/hello.txt", HELLO)
    api.write_file(sid, "/srv/app.py", APP.encode())
    api.start_process(sid, command="cd /srv && exec python3 -m http.server 8000 --bind "
                      "127.0.0.1 --directory /srv/www 2>/srv/http.log")
    api.start_process(sid, cmd=["python3", "/srv/app.py", "8001"])
    probe = ("import socket,sys\nfor p in (8000,8001):\n socket.create_connection("
             "('127.0.0.1',p),timeout=1).close()\n")
    deadline = time.monotonic() + 30
    while True:
        r = api.exec(sid, cmd=["python3", "-c", probe])
        if r.get("exit_code") == 0:
            return
        assert time.monotonic() < deadline, f"servers inside did not start: {r}"
        time.sleep(0.2)


def ws_connect(xd, sid, token):
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: {xd.host(sid, 8001)}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13"
               f"\r\nX-Isola-Access-Token: {token}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        assert b, f"closed during the handshake: {head!r}"
        head += b
    assert head.startswith(b"HTTP/1.1 101"), head
    want = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    assert b"Sec-WebSocket-Accept: " + want in head
    return s


def ws_send(s, data, op=1):
    mask = os.urandom(4)
    hdr = bytes([0x80 | op])
    hdr += bytes([0x80 | len(data)]) if len(data) < 126 else \
        bytes([0x80 | 126]) + struct.pack(">H", len(data))
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def ws_recv(s):
    def need(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            assert c, "closed"
            b += c
        return b
    h = need(2)
    n = h[1] & 127
    if n == 126:
        n = struct.unpack(">H", need(2))[0]
    return h[0] & 15, need(n)


def inside_log(xd, sid, name):
    r = xd.api.request("GET", f"/v1/sandboxes/{sid}/files", query={"path": f"/srv/{name}"})
    return r.body.decode(errors="replace") if r.status == 200 else ""
