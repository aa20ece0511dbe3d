# SPDX-License-Identifier: Apache-2.0
"""Port exposure: servers inside a sandbox reached through isolad's exposure listener.

Everything is judged at the real ends: the content the inside server produced, the inside
server's own request log, the bytes a raw socket received. One isolad with --expose-listen
serves the module (the session isolad runs without it, which checks the `off` answer).
"""

import hashlib
import json
import os
import socket
import time

import pytest

from expose_util import (HELLO, MAX_CONNS, Exposer, body_of, inside_log, raw, req,
                         start_servers, status_of, top_conftest, ws_connect, ws_recv, ws_send)

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
    cli = [str(top_conftest.CLI), "--socket", xd.d.socket]
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
    assert xd.api.request("GET", f"/v1/sandboxes/{sid}/ports").status == 410  # ended


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


def lifecycle_sandbox(xd, auto_resume):
    sb = xd.api.create_sandbox(auto_resume=auto_resume)
    start_servers(xd.api, sb["id"])
    return sb["id"], xd.expose(sb["id"], 8000)["token"]


def test_traffic_resumes_a_paused_sandbox_when_policy_allows(xd):
    sid, token = lifecycle_sandbox(xd, True)
    r = xd.api.request("POST", f"/v1/sandboxes/{sid}/pause")
    assert r.status == 200, r
    assert xd.api.get_json(f"/v1/sandboxes/{sid}")["state"] == "paused"
    r = xd.get(sid, 8000, "/hello.txt", token)
    assert status_of(r) == 200 and body_of(r) == HELLO, r
    assert xd.api.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    xd.api.delete_sandbox(sid)


@pytest.mark.parametrize("op", ["pause", "hibernate"])
def test_no_auto_resume_is_409_naming_the_state(xd, op):
    sid, token = lifecycle_sandbox(xd, False)
    r = xd.api.request("POST", f"/v1/sandboxes/{sid}/{op}", timeout=120)
    assert r.status == 200, r
    state = "paused" if op == "pause" else "hibernated"
    r = xd.get(sid, 8000, "/hello.txt", token)
    assert status_of(r) == 409 and state.encode() in body_of(r), r
    assert xd.api.get_json(f"/v1/sandboxes/{sid}")["state"] == state
    xd.api.delete_sandbox(sid)


def test_traffic_resumes_a_hibernated_sandbox(xd):
    sid, token = lifecycle_sandbox(xd, True)
    r = xd.api.request("POST", f"/v1/sandboxes/{sid}/hibernate", timeout=120)
    assert r.status == 200, r
    r = xd.get(sid, 8000, "/hello.txt", token)
    # the process tier keeps files, not processes (docs/persistence.md): the server may be
    # gone after the restore (502); either way the request woke the sandbox
    assert status_of(r) in (200, 502), r
    assert xd.api.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    xd.api.delete_sandbox(sid)


@pytest.mark.needs_microvm
def test_microvm_tier_through_virtio_serial(xd):
    """The same exposure on a microvm guest: the agent's tunnel runs over virtio-serial and
    connects to the guest's own loopback. One VM for every check (TCG boots are slow)."""
    slow = xd.d.client(timeout=top_conftest.MICROVM_CREATE_TIMEOUT)
    r = slow.request("POST", "/v1/sandboxes", json={"tier": "microvm"})
    assert r.status == 201, r
    sid = r.json()["id"]
    try:
        start_servers(slow, sid)
        token = xd.expose(sid, 8000)["token"]
        xd.expose(sid, 8001)
        r = xd.get(sid, 8000, "/hello.txt", token)
        assert status_of(r) == 200 and body_of(r) == HELLO, r
        assert status_of(xd.get(sid, 8000, "/hello.txt")) == 401
        s = ws_connect(xd, sid, token)
        try:
            ws_send(s, b"from the host")
            assert ws_recv(s) == (1, b"echo:from the host")
        finally:
            s.close()
        big = os.urandom(1024 * 1024)
        slow.write_file(sid, "/srv/www/big.bin", big)
        r = xd.get(sid, 8000, "/big.bin", token)
        assert status_of(r) == 200 and body_of(r) == big
        xd.expose(sid, 8009)
        r = xd.get(sid, 8009, "/", token)
        assert status_of(r) == 502 and b"8009" in body_of(r), r
    finally:
        slow.delete_sandbox(sid)


def wait_idle(xd, sid, timeout=15):
    deadline = time.monotonic() + timeout
    while xd.api.get_json(f"/v1/sandboxes/{sid}/ports")["connections_active"]:
        assert time.monotonic() < deadline, "tunnels still open"
        time.sleep(0.1)


def test_server_that_stops_reading_does_not_wedge_the_tunnel(xd, web):
    """The inside server answers and closes while the client is still uploading: the agent
    ends the tunnel, the client gets the answer or a reset, and nothing stays open."""
    sid, token = web
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=30)
    got = b""
    try:
        s.sendall(req("/reject", xd.host(sid, 8001), token,
                      extra=f"Content-Length: {8 << 20}\r\n"))
        try:
            for _ in range(128):
                s.sendall(os.urandom(64 * 1024))
        except OSError:
            pass  # reset once the tunnel is gone: expected
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except OSError:
            pass
    finally:
        s.close()
    assert got == b"" or got.startswith(b"HTTP/1.0 413"), got[:200]
    wait_idle(xd, sid)
    assert status_of(xd.get(sid, 8000, "/hello.txt", token)) == 200


def test_unexpose_cuts_live_connections(xd, web):
    sid, token = web
    xd.expose(sid, 8001)
    s = ws_connect(xd, sid, token)
    try:
        ws_send(s, b"before")
        assert ws_recv(s) == (1, b"echo:before")
        assert xd.api.request("DELETE", f"/v1/sandboxes/{sid}/ports/8001").status == 204
        s.settimeout(10)
        rest = b""
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    break
                rest += b
        except ConnectionResetError:
            pass
        assert b"echo" not in rest
    finally:
        s.close()
        xd.expose(sid, 8001)  # the module's other tests use it
    wait_idle(xd, sid)
