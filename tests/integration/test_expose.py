# SPDX-License-Identifier: Apache-2.0
"""Port exposure: servers inside a sandbox reached through isolad's exposure listener.

Everything is judged at the real ends: the content the inside server produced, the inside
server's own request log, the bytes a raw socket received. One isolad with --expose-listen
serves the module (the session isolad runs without it, which checks the `off` answer).
"""

import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import time

import pytest

import conftest
import isola_client as ic

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
        elif path.startswith("/echo"):
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
    """The module's isolad with an exposure listener, and helpers around it."""

    def __init__(self):
        self.xport = conftest.free_port()
        self.d = conftest.Isolad(extra_args=["--expose-listen", f"127.0.0.1:{self.xport}",
                                             "--expose-max-conns", str(MAX_CONNS)])
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
        problems = []
        if self.d.alive():
            self.d.destroy_all_sandboxes()
            rc = self.d.stop()
            if rc != 0:
                problems.append(f"isolad exited with {rc}")
        problems += self.d.new_sanitizer_reports()
        if not problems:
            shutil.rmtree(self.d.state_dir, ignore_errors=True)
        return problems


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


@pytest.fixture(scope="module")
def xd():
    x = Exposer()
    yield x
    problems = x.close()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def web(xd):
    """A sandbox with both servers; 8000 private, 8001 private. Returns (sid, token)."""
    sb = xd.api.create_sandbox()
    sid = sb["id"]
    start_servers(xd.api, sid)
    e = xd.expose(sid, 8000)
    e2 = xd.expose(sid, 8001)
    assert e["token"] == e2["token"], "one access token per sandbox"
    return sid, e["token"]


def inside_log(xd, sid, name):
    r = xd.api.request("GET", f"/v1/sandboxes/{sid}/files", query={"path": f"/srv/{name}"})
    return r.body.decode(errors="replace") if r.status == 200 else ""


def test_expose_answer_names_urls_and_token(xd, web):
    sid, token = web
    lst = xd.api.get_json(f"/v1/sandboxes/{sid}/ports")
    ports = {p["port"]: p for p in lst["ports"]}
    assert set(ports) >= {8000, 8001}
    p = ports[8000]
    assert p["url"] == f"http://8000-{sid}.isola.localhost:{xd.xport}/"
    assert p["path_url"] == f"http://127.0.0.1:{xd.xport}/_isola/{sid}/8000/"
    assert p["token"] == token and len(token) == 43 and p["public"] is False
    assert lst["max_connections"] == MAX_CONNS


def test_host_route_with_token_reaches_inside_server(xd, web):
    sid, token = web
    r = xd.get(sid, 8000, "/hello.txt", token)
    assert status_of(r) == 200, r
    assert body_of(r) == HELLO
    assert "GET /hello.txt" in inside_log(xd, sid, "http.log")


def test_path_route_strips_prefix_and_token(xd, web):
    sid, token = web
    r = raw(xd.xport, req(f"/_isola/{sid}/8001/echo?a=1", f"127.0.0.1:{xd.xport}", token,
                          extra="Cookie: theme=dark\r\n"))
    assert status_of(r) == 200, r
    seen = body_of(r).decode()
    # what the inside server received: the prefix gone, the token header gone
    assert seen.startswith("GET /echo?a=1 HTTP/1.1\r\n"), seen
    assert token not in seen and "x-isola-access-token" not in seen.lower()
    assert "Cookie: theme=dark" in seen


def test_no_token_is_401_and_inside_saw_nothing(xd, web):
    sid, token = web
    for t in (None, "x" * 43, token[:-1] + ("A" if token[-1] != "A" else "B"), token + "x"):
        r = xd.get(sid, 8000, "/never-forwarded-401.txt", t)
        assert status_of(r) == 401, r
    r = raw(xd.xport, req(f"/_isola/{sid}/8000/never-forwarded-401.txt",
                          f"127.0.0.1:{xd.xport}"))
    assert status_of(r) == 401
    time.sleep(0.3)
    assert "never-forwarded-401" not in inside_log(xd, sid, "http.log")


def test_query_token_sets_cookie_then_cookie_works(xd, web):
    sid, token = web
    r = xd.get(sid, 8001, f"/echo?x=1&isola_token={token}&y=2")
    assert status_of(r) == 302, r
    head = r.split(b"\r\n\r\n", 1)[0].decode()
    assert "\r\nLocation: /echo?x=1&y=2\r\n" in head, head
    cookie = [l for l in head.split("\r\n") if l.startswith("Set-Cookie:")][0]
    assert f"isola_token={token}" in cookie and "HttpOnly" in cookie and "Path=/;" in cookie
    # the browser comes back with the cookie: forwarded without the token
    r = xd.get(sid, 8001, "/echo?x=1&y=2", extra=f"Cookie: a=b; isola_token={token}\r\n")
    assert status_of(r) == 200, r
    seen = body_of(r).decode()
    assert token not in seen and "Cookie: a=b\r\n" in seen, seen
    # path form: the cookie is scoped to the sandbox's prefix
    r = raw(xd.xport, req(f"/_isola/{sid}/8001/echo?isola_token={token}",
                          f"127.0.0.1:{xd.xport}"))
    assert status_of(r) == 302
    assert f"Path=/_isola/{sid}/8001/;".encode() in r
    assert f"\r\nLocation: /_isola/{sid}/8001/echo\r\n".encode() in r


def test_unknown_sandbox_or_port_is_404(xd, web):
    sid, token = web
    for host in (xd.host("nosuchsandbox0000", 8000), xd.host(sid, 8002),
                 f"8000-{sid}.other.domain", "localhost"):
        r = raw(xd.xport, req("/hello.txt", host, token))
        assert status_of(r) == 404, (host, r)
    r = raw(xd.xport, req("/_isola/nosuchsandbox0000/8000/", "x", token))
    assert status_of(r) == 404


def test_public_exposure_needs_no_token(xd, web):
    sid, _ = web
    sb = xd.api.create_sandbox()
    start_servers(xd.api, sb["id"])
    e = xd.expose(sb["id"], 8000, public=True)
    assert e["public"] is True and "token" not in e
    r = xd.get(sb["id"], 8000, "/hello.txt")
    assert status_of(r) == 200 and body_of(r) == HELLO
    # the other, private, port of the same sandbox still wants the token
    xd.expose(sb["id"], 8001)
    assert status_of(xd.get(sb["id"], 8001, "/echo")) == 401
    xd.api.delete_sandbox(sb["id"])


def test_unexpose_then_404_and_cli(xd, web, tmp_path):
    sid, token = web
    cli = [str(conftest.CLI), "--socket", xd.d.socket]
    import subprocess
    out = subprocess.run(cli + ["--json", "expose", sid, "8000"], capture_output=True,
                         timeout=30)
    assert out.returncode == 0, out
    doc = json.loads(out.stdout)
    assert doc["port"] == 8000 and doc["token"] == token
    human = subprocess.run(cli + ["expose", sid, "8001"], capture_output=True, timeout=30)
    assert human.returncode == 0 and f"8001-{sid}.isola.localhost".encode() in human.stdout
    assert token.encode() in human.stdout
    ls = subprocess.run(cli + ["ports", sid], capture_output=True, timeout=30)
    assert ls.returncode == 0 and b"8000" in ls.stdout and b"token" in ls.stdout, ls
    # a port only for this test, so the module's exposures stay
    xd.expose(sid, 8005)
    rm = subprocess.run(cli + ["unexpose", sid, "8005"], capture_output=True, timeout=30)
    assert rm.returncode == 0, rm
    r = xd.get(sid, 8005, "/", token)
    assert status_of(r) == 404
    again = subprocess.run(cli + ["unexpose", sid, "8005"], capture_output=True, timeout=30)
    assert again.returncode == 1 and b"not exposed" in again.stderr
    bad = subprocess.run(cli + ["expose", sid, "70000"], capture_output=True, timeout=30)
    assert bad.returncode == 2


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


def test_websocket_echo_round_trip(xd, web):
    sid, token = web
    s = ws_connect(xd, sid, token)
    try:
        for msg in (b"hi", b"x" * 300, "snowman \u2603".encode()):
            ws_send(s, msg)
            op, data = ws_recv(s)
            assert (op, data) == (1, b"echo:" + msg)
    finally:
        s.close()


def test_streamed_chunks_arrive_incrementally(xd, web):
    sid, token = web
    xd.api.sh(sid, "rm -f /srv/go")
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=20)
    try:
        s.sendall(req("/stream", xd.host(sid, 8001), token))
        got = b""
        while b"chunk1\n" not in got:
            b = s.recv(4096)
            assert b, got
            got += b
        # the server holds chunk2 until /srv/go exists: chunk1 came through alone
        assert b"chunk2" not in got
        xd.api.write_file(sid, "/srv/go", b"")
        while not got.endswith(b"0\r\n\r\n"):
            b = s.recv(4096)
            assert b, got
            got += b
        assert b"Transfer-Encoding: chunked" in got and b"7\r\nchunk2\n\r\n" in got
    finally:
        s.close()


def test_large_upload_and_download_pass_intact(xd, web):
    sid, token = web
    data = os.urandom(3 * 1024 * 1024 + 17)  # beyond several credit windows
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=30)
    try:
        s.sendall(req("/upload", xd.host(sid, 8001), token,
                      extra=f"Content-Length: {len(data)}\r\n") + data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    finally:
        s.close()
    assert status_of(out) == 200 and body_of(out) == hashlib.sha256(data).hexdigest().encode()
    big = os.urandom(2 * 1024 * 1024)
    xd.api.write_file(sid, "/srv/www/big.bin", big)
    r = xd.get(sid, 8000, "/big.bin", token)
    assert status_of(r) == 200 and body_of(r) == big


def test_nothing_listening_is_502_naming_the_port(xd, web):
    sid, token = web
    xd.expose(sid, 8009)
    r = xd.get(sid, 8009, "/", token)
    assert status_of(r) == 502, r
    assert b"8009" in body_of(r) and b"nothing listens" in body_of(r)


def test_connection_limit_and_counters(xd, web):
    sid, token = web
    held = [ws_connect(xd, sid, token) for _ in range(MAX_CONNS)]
    try:
        r = xd.get(sid, 8000, "/hello.txt", token)
        assert status_of(r) == 503 and b"limit" in body_of(r), r
        lst = xd.api.get_json(f"/v1/sandboxes/{sid}/ports")
        assert lst["connections_active"] == MAX_CONNS
        p = {e["port"]: e for e in lst["ports"]}
        assert p[8001]["connections"]["active"] == MAX_CONNS
        assert p[8000]["connections"]["refused"] >= 1
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 10
    while xd.api.get_json(f"/v1/sandboxes/{sid}/ports")["connections_active"]:
        assert time.monotonic() < deadline, "tunnels not released after the clients left"
        time.sleep(0.1)
    r = xd.get(sid, 8000, "/hello.txt", token)
    assert status_of(r) == 200
    lst = xd.api.get_json(f"/v1/sandboxes/{sid}/ports")
    p = {e["port"]: e for e in lst["ports"]}
    assert p[8000]["connections"]["bytes_out"] >= len(HELLO)
    assert p[8000]["connections"]["bytes_in"] > 0 and lst["bytes_out"] > 0


def test_destroy_removes_exposures(xd):
    sb = xd.api.create_sandbox()
    sid = sb["id"]
    start_servers(xd.api, sid)
    e = xd.expose(sid, 8000)
    assert status_of(xd.get(sid, 8000, "/hello.txt", e["token"])) == 200
    ports_file = os.path.join(xd.d.state_dir, "sandboxes", sid, "ports.json")
    assert os.path.exists(ports_file)
    assert xd.api.delete_sandbox(sid).status == 204
    assert not os.path.exists(ports_file)
    assert status_of(xd.get(sid, 8000, "/hello.txt", e["token"])) == 404
    assert xd.api.request("GET", f"/v1/sandboxes/{sid}/ports").status == 404


def test_exposures_survive_isolad_restart(xd, web):
    sid, token = web
    xd.d.restart()
    r = xd.get(sid, 8000, "/hello.txt", token)
    assert status_of(r) == 200 and body_of(r) == HELLO


def test_port_api_validation(xd, web):
    sid, _ = web
    for body in ({"port": 0}, {"port": 65536}, {"port": "80"}, {"port": 80, "x": 1}, {}):
        r = xd.api.request("POST", f"/v1/sandboxes/{sid}/ports", json=body)
        assert r.status == 400, (body, r)
    assert xd.api.request("DELETE", f"/v1/sandboxes/{sid}/ports/0").status == 400
    assert xd.api.request("POST", "/v1/sandboxes/nosuch/ports",
                          json={"port": 80}).status == 404


def test_exposure_off_without_listener(api, sandbox):
    """The session isolad has no --expose-listen: the routes say so."""
    r = api.request("POST", f"/v1/sandboxes/{sandbox['id']}/ports", json={"port": 8000})
    assert r.status == 503 and "--expose-listen" in r.error_message, r
