# SPDX-License-Identifier: Apache-2.0
"""Port exposure on keep-alive connections: EVERY request on a client connection is routed,
authorized and rewritten, not only the first. Judged at the sink: what an HTTP/1.1 echo server
inside the sandbox received (its answers and its own log)."""

import socket
import time

import pytest

from expose_util import Exposer, inside_log

# python3 http.server with keep-alive: answers every request with the request line, the
# headers and the (de-chunked) body it received, and logs the same to /srv/ka.log.
KA = r'''
import http.server, socketserver, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def any(self):
        head = self.requestline + "\r\n" + "".join("%s: %s\r\n" % kv for kv in self.headers.items())
        body = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass
                    break
                body += self.rfile.read(n)
                self.rfile.readline()
        elif self.headers.get("Content-Length"):
            body = self.rfile.read(int(self.headers["Content-Length"]))
        out = head.encode() + b"BODY:" + body
        with open("/srv/ka.log", "ab") as f:
            f.write(out + b"\n----\n")
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = any

    def log_message(self, *a):
        pass

class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''
PORT = 8080


@pytest.fixture(scope="module")
def xd():
    x = Exposer()
    yield x
    problems = x.close()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def start_ka(api, sid):
    api.write_file(sid, "/srv/ka.py", KA.encode())
    api.start_process(sid, cmd=["python3", "/srv/ka.py", str(PORT)])
    probe = f"import socket\nsocket.create_connection(('127.0.0.1',{PORT}),timeout=1).close()\n"
    deadline = time.monotonic() + 30
    while api.exec(sid, cmd=["python3", "-c", probe]).get("exit_code") != 0:
        assert time.monotonic() < deadline, "keep-alive server inside did not start"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def pair(xd):
    """Sandboxes A and B, each with the keep-alive echo server on 8080, exposed privately."""
    out = []
    for _ in range(2):
        sid = xd.api.create_sandbox()["id"]
        xd.api.sh(sid, "mkdir -p /srv")
        start_ka(xd.api, sid)
        out.append((sid, xd.expose(sid, PORT)["token"]))
    assert out[0][1] != out[1][1]
    return out


class Conn:
    """One client connection to the listener; reads responses one at a time."""

    def __init__(self, xd):
        self.s = socket.create_connection(("127.0.0.1", xd.xport), timeout=20)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data if isinstance(data, bytes) else data.encode())

    def _fill(self):
        b = self.s.recv(65536)
        if not b:
            raise EOFError
        self.buf += b

    def response(self):
        """(status, body) of the next response; EOFError when the connection closed."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return int(head.split(b" ")[1]), body.decode(errors="replace")

    def closed(self):
        """True when the listener closes the connection with nothing more."""
        try:
            while True:
                b = self.s.recv(65536)
                if not b:
                    return self.buf == b""
                self.buf += b
        except ConnectionResetError:
            return True

    def close(self):
        self.s.close()


def path_req(sid, path, token=None, how="header", method="GET", extra="", body=b""):
    h = f"{method} /_isola/{sid}/{PORT}{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if token and how == "header":
        h += f"X-Isola-Access-Token: {token}\r\n"
    elif token and how == "cookie":
        h += f"Cookie: a=1; isola_token={token}; b=2\r\n"
    return (h + extra + "\r\n").encode() + body


def clean(seen, sid, tokens):
    """The inside server got the request without the prefix and without any token."""
    line = seen.split("\r\n", 1)[0]
    assert "/_isola/" not in line, f"prefix reached the sandbox: {line!r}"
    assert f"/_isola/{sid}" not in seen
    for t in tokens:
        assert t not in seen, f"a token reached the sandbox: {seen!r}"
    assert "x-isola-access-token" not in seen.lower(), seen
    assert "isola_token" not in seen, seen


def assert_only_a_reached_a(xd, a, marker, ta, tb):
    """Sandbox A's server got A's request and nothing of B's: no B request, no token."""
    time.sleep(0.3)
    log_a = inside_log(xd, a, "ka.log")
    assert f"/{marker}-a" in log_a
    assert f"{marker}-b" not in log_a, "B's request was delivered into sandbox A"
    assert tb not in log_a and ta not in log_a, "a token reached sandbox A"


def test_three_requests_on_one_connection_are_each_rewritten(xd, pair):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        for i, how in enumerate(("header", "cookie", "header")):
            c.send(path_req(a, f"/ka-three-{i}?q={i}", ta, how))
            st, seen = c.response()
            assert st == 200, seen
            assert seen.startswith(f"GET /ka-three-{i}?q={i} HTTP/1.1\r\n"), seen
            clean(seen, a, [ta])
            if how == "cookie":
                assert "Cookie: a=1; b=2" in seen, seen
    finally:
        c.close()


def test_content_length_post_then_get(xd, pair):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        # the body holds something that looks like a request head: it is data, not a head
        body = f"GET /_isola/{a}/{PORT}/not-a-head HTTP/1.1\r\n\r\n".encode()
        c.send(path_req(a, "/ka-post", ta, method="POST",
                        extra=f"Content-Length: {len(body)}\r\n", body=body))
        st, seen = c.response()
        assert st == 200 and seen.startswith("POST /ka-post HTTP/1.1\r\n"), seen
        assert seen.endswith("BODY:" + body.decode()), seen
        c.send(path_req(a, "/ka-after-post", ta))
        st, seen = c.response()
        assert st == 200 and seen.startswith("GET /ka-after-post HTTP/1.1\r\n"), seen
        clean(seen, a, [ta])
    finally:
        c.close()


def test_chunked_post_then_get(xd, pair):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        chunks = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
        c.send(path_req(a, "/ka-chunked", ta, method="POST",
                        extra="Transfer-Encoding: chunked\r\n")[:-2])
        # the body in small pieces, so the framing crosses reads
        c.send(b"\r\n")
        for i in range(0, len(chunks), 3):
            c.send(chunks[i:i + 3])
        st, seen = c.response()
        assert st == 200 and seen.startswith("POST /ka-chunked HTTP/1.1\r\n"), seen
        assert seen.endswith("BODY:hello, world"), seen
        c.send(path_req(a, "/ka-after-chunked", ta, how="cookie"))
        st, seen = c.response()
        assert st == 200 and seen.startswith("GET /ka-after-chunked HTTP/1.1\r\n"), seen
        clean(seen, a, [ta])
    finally:
        c.close()


def test_pipelined_requests_in_one_write(xd, pair):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        c.send(path_req(a, "/ka-pipe-0", ta) +
               path_req(a, "/ka-pipe-1", ta, method="POST", extra="Content-Length: 3\r\n",
                        body=b"abc") +
               path_req(a, "/ka-pipe-2", ta, how="cookie"))
        for i in range(3):
            st, seen = c.response()
            assert st == 200 and seen.startswith(f"/ka-pipe-{i}", seen.index(" ") + 1), seen
            clean(seen, a, [ta])
    finally:
        c.close()


@pytest.mark.parametrize("pipelined", [False, True])
def test_request_for_another_sandbox_never_reaches_the_first(xd, pair, pipelined):
    (a, ta), (b, tb) = pair
    marker = f"ka-cross-{int(pipelined)}"
    first = path_req(a, f"/{marker}-a", ta)
    second = path_req(b, f"/{marker}-b", tb, how="cookie")
    c = Conn(xd)
    try:
        if pipelined:
            c.send(first + second)
        else:
            c.send(first)
            st, seen = c.response()
            assert st == 200 and f"/{marker}-a" in seen, seen
            c.send(second)
        if pipelined:
            st, seen = c.response()
            assert st == 200 and f"/{marker}-a" in seen, seen
        assert c.closed(), "the listener answered a request for another sandbox"
    finally:
        c.close()
    assert_only_a_reached_a(xd, a, marker, ta, tb)


def test_same_sandbox_other_port_or_no_token_is_not_forwarded(xd, pair):
    (a, ta), _ = pair
    for second in (path_req(a, "/ka-notoken-b"),  # no token on the second request
                   f"GET /_isola/{a}/8081/ka-otherport-b HTTP/1.1\r\nHost: x\r\n"
                   f"X-Isola-Access-Token: {ta}\r\n\r\n".encode()):
        c = Conn(xd)
        try:
            c.send(path_req(a, "/ka-first", ta))
            assert c.response()[0] == 200
            c.send(second)
            assert c.closed()
        finally:
            c.close()
    time.sleep(0.3)
    log_a = inside_log(xd, a, "ka.log")
    assert "ka-notoken-b" not in log_a and "ka-otherport-b" not in log_a


@pytest.mark.parametrize("second", [
    b"GET /x HTTP/1.1\nHost: y\n\n",                               # bare LF
    b"GET /ka-bad-te HTTP/1.1\r\nHost: y\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"BROKEN\r\n\r\n",
])
def test_malformed_second_head_closes_and_forwards_nothing(xd, pair, second):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        c.send(path_req(a, "/ka-before-bad", ta))
        assert c.response()[0] == 200
        c.send(second.replace(b"/ka-bad-te", f"/_isola/{a}/{PORT}/ka-bad-te".encode())
               .replace(b"Host: y\r\n", f"Host: y\r\nX-Isola-Access-Token: {ta}\r\n".encode()))
        assert c.closed()
    finally:
        c.close()
    time.sleep(0.3)
    log_a = inside_log(xd, a, "ka.log")
    assert "ka-bad-te" not in log_a and "BROKEN" not in log_a and "GET /x " not in log_a


def test_smuggling_framing_on_first_request_is_400(xd, pair):
    (a, ta), _ = pair
    for extra in ("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
                  "Content-Length: 3\r\nContent-Length: 4\r\n", "Content-Length: -1\r\n",
                  "Transfer-Encoding: chunked, identity\r\n"):
        c = Conn(xd)
        try:
            c.send(path_req(a, "/ka-smuggle", ta, method="POST", extra=extra))
            st, body = c.response()
            assert st == 400 and "framing" in body, body
        finally:
            c.close()
    assert "ka-smuggle" not in inside_log(xd, a, "ka.log")


def test_host_form_keepalive_drops_the_token_header(xd, pair):
    (a, ta), _ = pair
    host = f"{PORT}-{a}.isola.localhost:{xd.xport}"
    c = Conn(xd)
    try:
        for i in range(2):
            c.send(f"GET /ka-host-{i} HTTP/1.1\r\nHost: {host}\r\n"
                   f"X-Isola-Access-Token: {ta}\r\n\r\n")
            st, seen = c.response()
            assert st == 200 and seen.startswith(f"GET /ka-host-{i} HTTP/1.1\r\n"), seen
            clean(seen, a, [ta])
    finally:
        c.close()


UPGRADE = "Upgrade: websocket\r\nConnection: Upgrade\r\n"


@pytest.mark.parametrize("pipelined", [False, True])
def test_declined_upgrade_then_another_request_never_passes_unchecked(xd, pair, pipelined):
    """The server inside answers an Upgrade with 200 and keeps the connection (python's
    http.server ignores Upgrade): the relay must not turn opaque, or B's request (and B's
    token) would ride the connection into sandbox A unchecked."""
    (a, ta), (b, tb) = pair
    marker = f"ka-declined-{int(pipelined)}"
    first = path_req(a, f"/{marker}-a", ta, extra=UPGRADE)
    second = path_req(b, f"/{marker}-b", tb, how="cookie")
    c = Conn(xd)
    try:
        if pipelined:
            c.send(first + second)  # bytes before the server's answer never pass
        else:
            c.send(first)
        st, seen = c.response()
        assert st == 200 and f"/{marker}-a" in seen, seen
        if not pipelined:
            c.send(second)
        assert c.closed(), "the listener answered a request sent after a declined Upgrade"
    finally:
        c.close()
    assert_only_a_reached_a(xd, a, marker, ta, tb)


def test_upgrade_on_a_later_request_is_not_forwarded(xd, pair):
    (a, ta), _ = pair
    c = Conn(xd)
    try:
        c.send(path_req(a, "/ka-up-first", ta))
        assert c.response()[0] == 200
        c.send(path_req(a, "/ka-up-later", ta, extra=UPGRADE))
        assert c.closed(), "an Upgrade on a reused connection was forwarded"
    finally:
        c.close()
    time.sleep(0.3)
    assert "ka-up-later" not in inside_log(xd, a, "ka.log")
