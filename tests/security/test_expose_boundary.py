# SPDX-License-Identifier: Apache-2.0
"""Port exposure boundary: what a client of the exposure listener and code inside a sandbox
must not get. Judged at the sinks: the inside servers' request logs, the listener's own
accept log, isolad's request counter and a host listener of our own."""

import re
import socket
import threading
import time

import pytest

from expose_util import (Exposer, body_of, inside_log, raw, req, start_servers, status_of)

HEAD_TIMEOUT_S = 10  # the listener's request-head deadline (expose_config default)


@pytest.fixture(scope="module")
def xd():
    # 0.0.0.0: the listener answers on every host address, so a sandbox that could reach
    # any of them would show up in its accept log
    x = Exposer(bind="0.0.0.0")
    yield x
    problems = x.close()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def pair(xd):
    """Two sandboxes A and B, each with both servers and ports 8000/8001 exposed privately."""
    out = []
    for _ in range(2):
        sid = xd.api.create_sandbox()["id"]
        start_servers(xd.api, sid)
        tok = xd.expose(sid, 8000)["token"]
        xd.expose(sid, 8001)
        out.append((sid, tok))
    assert out[0][1] != out[1][1]
    return out


def seen(xd, sid, marker):
    return marker in inside_log(xd, sid, "app.log") or marker in inside_log(xd, sid, "http.log")


def test_token_of_a_does_not_open_b(xd, pair):
    (a, ta), (b, tb) = pair
    for host_sid, tok in ((b, ta), (a, tb)):
        r = xd.get(host_sid, 8001, "/echo-cross-token", tok)
        assert status_of(r) == 401, r
        r = raw(xd.xport, req(f"/_isola/{host_sid}/8001/echo-cross-token", "x", tok))
        assert status_of(r) == 401, r
        # a cookie of the other sandbox is no better
        r = xd.get(host_sid, 8001, "/echo-cross-token", extra=f"Cookie: isola_token={tok}\r\n")
        assert status_of(r) == 401, r
    time.sleep(0.3)
    assert not seen(xd, a, "echo-cross-token") and not seen(xd, b, "echo-cross-token")


def test_two_host_headers_rejected(xd, pair):
    (a, ta), (b, tb) = pair
    for first, second in ((a, b), (b, a)):
        data = (f"GET /echo-two-hosts HTTP/1.1\r\nHost: {xd.host(first, 8001)}\r\n"
                f"Host: {xd.host(second, 8001)}\r\nX-Isola-Access-Token: {ta}\r\n\r\n").encode()
        assert status_of(raw(xd.xport, data)) == 400
    time.sleep(0.3)
    assert not seen(xd, a, "echo-two-hosts") and not seen(xd, b, "echo-two-hosts")


def test_absolute_uri_to_another_id_rejected(xd, pair):
    (a, ta), (b, _) = pair
    for target in (f"http://{xd.host(b, 8001)}/echo-absolute",
                   f"http://127.0.0.1:{xd.xport}/_isola/{b}/8001/echo-absolute",
                   f"{xd.host(b, 8001)}:80", "*"):
        data = (f"GET {target} HTTP/1.1\r\nHost: {xd.host(a, 8001)}\r\n"
                f"X-Isola-Access-Token: {ta}\r\n\r\n").encode()
        assert status_of(raw(xd.xport, data)) == 400, target
    time.sleep(0.3)
    assert not seen(xd, a, "echo-absolute") and not seen(xd, b, "echo-absolute")


def test_host_route_wins_over_a_path_naming_another_sandbox(xd, pair):
    """Host names A, the path names B: the request goes to A (whose token it carries) with
    the path untouched; B never sees it."""
    (a, ta), (b, _) = pair
    r = xd.get(a, 8001, f"/_isola/{b}/8001/echo-host-wins", ta)
    assert status_of(r) == 200, r
    assert body_of(r).startswith(f"GET /_isola/{b}/8001/echo-host-wins HTTP/1.1".encode())
    time.sleep(0.3)
    assert seen(xd, a, "echo-host-wins") and not seen(xd, b, "echo-host-wins")


@pytest.mark.parametrize("tail", [
    "../../{b}/8001/echo-dotdot",
    "%2e%2e/%2E%2E/{b}/8001/echo-dotdot",
    ".%2e/.%2e/{b}/8001/echo-dotdot",
    "x/..%2f..%2f{b}/8001/echo-dotdot",
    "echo-dotdot/..",
])
def test_dotdot_in_path_form_rejected(xd, pair, tail):
    (a, ta), (b, _) = pair
    path = f"/_isola/{a}/8001/" + tail.format(b=b)
    r = raw(xd.xport, req(path, f"127.0.0.1:{xd.xport}", ta))
    assert status_of(r) == 400, (path, r)
    time.sleep(0.2)
    assert not seen(xd, a, "echo-dotdot") and not seen(xd, b, "echo-dotdot")


@pytest.mark.parametrize("head", [
    "GET /echo-smuggle HTTP/1.1\r\nHost: {h}\r\n folded: yes\r\n",
    "GET /echo-smuggle HTTP/1.1\r\nHost : {h}\r\n",
    "GET /echo-smuggle HTTP/1.1\nHost: {h}\n",
    "GET /echo-smuggle HTTP/1.1\r\nHost: {h}\r\nX-A: a\x00b\r\n",
    "GET /echo-smuggle HTTP/2.0\r\nHost: {h}\r\n",
    "GET  /echo-smuggle HTTP/1.1\r\nHost: {h}\r\n",
    "GET /echo-smuggle HTTP/1.1\r\n",
])
def test_malformed_heads_rejected(xd, pair, head):
    (a, ta), _ = pair
    data = (head.format(h=xd.host(a, 8001)) + f"X-Isola-Access-Token: {ta}\r\n\r\n").encode()
    assert status_of(raw(xd.xport, data)) == 400, head
    time.sleep(0.2)
    assert not seen(xd, a, "echo-smuggle")


def test_oversized_heads_rejected(xd, pair):
    (a, ta), _ = pair
    big = req("/echo-big", xd.host(a, 8001), ta, extra="X-Pad: " + "p" * 20000 + "\r\n")
    assert status_of(raw(xd.xport, big)) == 431
    many = req("/echo-big", xd.host(a, 8001), ta,
               extra="".join(f"X-H{i}: v\r\n" for i in range(100)))
    assert status_of(raw(xd.xport, many)) == 431
    # a head that never ends is cut at the cap, not buffered forever
    endless = b"GET /echo-big HTTP/1.1\r\nX-Pad: " + b"q" * 64 * 1024
    assert status_of(raw(xd.xport, endless)) == 431
    time.sleep(0.2)
    assert not seen(xd, a, "echo-big")


def test_slow_head_is_cut(xd, pair):
    (a, ta), _ = pair
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=HEAD_TIMEOUT_S + 10)
    t0 = time.monotonic()
    try:
        s.sendall(f"GET /echo-slow HTTP/1.1\r\nHost: {xd.host(a, 8001)}\r\n".encode())
        out = b""
        while True:
            try:
                b = s.recv(4096)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
            # a byte now and then does not buy more time
            try:
                s.sendall(b"X-Drip: 1\r\n")
            except OSError:
                pass
    finally:
        s.close()
    took = time.monotonic() - t0
    assert out.startswith(b"HTTP/1.1 408"), out
    assert took < HEAD_TIMEOUT_S + 5, took
    assert not seen(xd, a, "echo-slow")


def test_slow_drip_does_not_extend_the_deadline(xd, pair):
    (a, _), _ = pair
    s = socket.create_connection(("127.0.0.1", xd.xport), timeout=HEAD_TIMEOUT_S + 10)
    t0 = time.monotonic()
    got = []

    def reader():
        try:
            got.append(s.recv(4096))
        except OSError:
            got.append(b"")

    th = threading.Thread(target=reader)
    th.start()
    try:
        s.sendall(b"GET /echo-drip HTTP/1.1\r\n")
        while th.is_alive() and time.monotonic() - t0 < HEAD_TIMEOUT_S + 8:
            try:
                s.sendall(b"X: y\r\n"[:1])
            except OSError:
                break
            time.sleep(0.5)
        th.join(5)
    finally:
        s.close()
    assert got and got[0].startswith(b"HTTP/1.1 408"), got
    assert time.monotonic() - t0 < HEAD_TIMEOUT_S + 5


def host_addresses():
    """Every IPv4 address of this host (the sandbox must reach none of them)."""
    addrs = {"127.0.0.1"}
    try:
        with open("/proc/net/fib_trie") as f:
            lines = f.read().splitlines()
        for i, l in enumerate(lines):
            if "/32 host LOCAL" in l and i > 0:
                m = re.search(r"(\d+\.\d+\.\d+\.\d+)", lines[i - 1])
                if m:
                    addrs.add(m.group(1))
    except OSError:
        pass
    return sorted(addrs)


PROBE = r'''
import socket, sys, json
targets = json.loads(sys.argv[1])
res = {}
gw = []
try:
    for l in open("/proc/net/route").read().splitlines()[1:]:
        f = l.split()
        if f[1] == "00000000" and f[2] != "00000000":
            g = int(f[2], 16)
            gw.append(".".join(str((g >> s) & 255) for s in (0, 8, 16, 24)))
except OSError:
    pass
for host, port in targets + [[g, p] for g in gw for _, p in targets[:2]]:
    try:
        s = socket.create_connection((host, port), timeout=2)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        res["%s:%d" % (host, port)] = "connected"
        s.close()
    except OSError as e:
        res["%s:%d" % (host, port)] = e.__class__.__name__
print(json.dumps(res))
'''


def api_requests(xd):
    r = xd.api.request("GET", "/metrics")
    m = re.search(rb"^isola_api_requests_total (\d+)$", r.body, re.M)
    assert m, r.body[:500]
    return int(m.group(1))


def test_sandbox_cannot_reach_the_listener_or_the_api(xd, pair):
    import json
    (a, _), _ = pair
    # our own sink on every host address: a connection from the sandbox would land here
    sink = socket.socket()
    sink.bind(("0.0.0.0", 0))
    sink.listen(16)
    sink.settimeout(0.2)
    sink_port = sink.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept_loop():
        while not stop.is_set():
            try:
                c, addr = sink.accept()
                accepted.append(addr)
                c.close()
            except OSError:
                pass

    th = threading.Thread(target=accept_loop)
    th.start()
    log_before = len(xd.d.log_text())
    before = api_requests(xd)
    targets = [[h, p] for h in host_addresses() for p in (xd.xport, xd.d.port, sink_port)]
    try:
        out = xd.api.exec(a, cmd=["python3", "-c", PROBE, json.dumps(targets)],
                          http_timeout=300)
        assert out["exit_code"] == 0, out
        time.sleep(0.5)
    finally:
        stop.set()
        th.join(5)
        sink.close()
    tried = json.loads(out["stdout"])
    assert len(tried) >= len(targets)
    # judged at the sinks, not by what connect() said inside
    new_log = xd.d.log_text()[log_before:]
    assert "exposure: connection from" not in new_log, new_log[-2000:]
    assert accepted == [], accepted
    # only our own calls were counted: the first /metrics and the exec
    assert api_requests(xd) == before + 2
    # connect() itself may succeed inside: the egress proxy accepts every TCP connection and
    # decides after reading the head (docs/network.md), which is why only the sinks count


def test_other_tenants_ports_are_not_found(xd):
    """A tenant can neither expose, list nor unexpose another tenant's sandbox ports: the
    same 404 as a missing sandbox. Judged by the owner's listing afterwards."""
    from tenancy_util import Tenant
    t1, t2 = Tenant(xd.d), Tenant(xd.d)
    try:
        sid = t1.client.create_sandbox()["id"]
        r = t1.client.request("POST", f"/v1/sandboxes/{sid}/ports", json={"port": 8000})
        assert r.status == 201, r
        missing = t2.client.request("GET", "/v1/sandboxes/nosuchsandbox00/ports")
        for method, path, body in (("POST", f"/v1/sandboxes/{sid}/ports", {"port": 9000}),
                                   ("GET", f"/v1/sandboxes/{sid}/ports", None),
                                   ("DELETE", f"/v1/sandboxes/{sid}/ports/8000", None)):
            r = t2.client.request(method, path, json=body)
            assert r.status == 404 and r.error_code == missing.error_code, (method, r)
            assert "token" not in r.text
        ports = t1.client.get_json(f"/v1/sandboxes/{sid}/ports")["ports"]
        assert [p["port"] for p in ports] == [8000]
    finally:
        t1.cleanup()
        t2.cleanup()
