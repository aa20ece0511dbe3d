# SPDX-License-Identifier: Apache-2.0
"""isolad's HTTP exposure against hostile clients, over raw sockets: oversized headers and
URLs, lying and conflicting Content-Length, Content-Length with Transfer-Encoding, JSON
nesting, and slow clients that never finish their headers or body — each bounded (by a
status or by the idle timeout of a second isolad started with --idle-timeout 2) while
isolad keeps answering everyone else.

Covered elsewhere: the 1 MiB JSON body cap with a truthful Content-Length
(tests/integration/test_sandboxes.py::test_create_body_over_1mib_is_413), TCP only with the
token (tests/integration/test_auth.py), the control socket 0600 and unreachable from inside
(test_auth.py::test_unix_socket_is_0600_root, test_escape.py::test_control_socket_unreachable).
"""

import json
import socket
import threading
import time

import pytest


IDLE = 2  # --idle-timeout of the slow-client isolad, seconds


def raw(path, data, timeout=10.0, hold=False):
    """Sends data on a fresh connection to the unix socket at path; returns (status or None,
    body bytes, seconds until the server answered or closed). hold: keep our side open
    (never shut down writing), as a stalled client does."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    t0 = time.monotonic()
    try:
        s.sendall(data)
    except OSError:
        pass
    if not hold:
        s.shutdown(socket.SHUT_WR)
    buf = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
            if b"\r\n\r\n" in buf and not hold:
                head, _, body = buf.partition(b"\r\n\r\n")
                cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                if cl and len(body) >= int(cl[0].split(b":")[1]):
                    break
    except socket.timeout:
        raise AssertionError(f"no answer and no close within {timeout}s; got {buf[:200]!r}") \
            from None
    except ConnectionResetError:
        pass
    finally:
        s.close()
    took = time.monotonic() - t0
    if not buf.startswith(b"HTTP/1.1 "):
        return None, buf, took
    head, _, body = buf.partition(b"\r\n\r\n")
    cl = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
    if cl:
        body = body[:int(cl[0].split(b":")[1])]
    return int(head.split()[1]), body, took


def post(body, headers=(), path="/v1/sandboxes"):
    h = b"".join(k + b": " + v + b"\r\n" for k, v in headers)
    return b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + h + b"\r\n" + body


def still_serving(api):
    assert api.request("GET", "/v1/health", timeout=5).status == 200


@pytest.fixture(scope="module")
def slow_isolad():
    import seclib
    d = seclib.ExtraIsolad(extra_args=["--idle-timeout", str(IDLE)])
    yield d
    problems = d.shutdown()
    assert not problems, problems


def test_oversized_headers_and_url(api, isolad):
    for what, req in [
        ("one 40 KiB header", b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 +
         b"\r\n\r\n"),
        ("3000 headers", b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" +
         b"".join(b"X-%d: y\r\n" % i for i in range(3000)) + b"\r\n"),
        ("a 20 KiB URL", b"GET /v1/health?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]:
        status, _, took = raw(isolad.socket, req)
        assert status in (413, 414, 431), f"{what}: {status}"
        assert took < 5, f"{what}: answered after {took:.1f}s"
    still_serving(api)


def test_declared_oversize_body_refused_before_it_is_sent(isolad):
    """Content-Length says 2 MB for a JSON route: 413 at once, without waiting for (or
    reading) a body that never comes."""
    status, body, took = raw(isolad.socket, post(b"{", [(b"Content-Type", b"application/json"),
                                                         (b"Content-Length", b"2000000")]),
                             hold=True, timeout=5)
    assert status == 413 and json.loads(body)["code"] == "too_large", (status, body)
    assert took < 2


@pytest.mark.parametrize("headers", [
    [(b"Content-Length", b"2"), (b"Content-Length", b"9")],
    [(b"Content-Length", b"2"), (b"Transfer-Encoding", b"chunked")],
    [(b"Transfer-Encoding", b"chunked"), (b"Content-Length", b"5")],
], ids=["two-lengths", "length-and-chunked", "chunked-and-length"])
def test_conflicting_framing_is_refused(api, isolad, headers):
    """Two readers could see two different bodies (request smuggling): 400, and nothing is
    created from either reading."""
    before = {sb["id"] for sb in api.list_sandboxes()}
    status, body, _ = raw(isolad.socket, post(b"{}" + b"0\r\n\r\n",
                                              [(b"Content-Type", b"application/json")] + headers))
    assert status == 400 and json.loads(body)["code"] == "invalid", (status, body)
    assert {sb["id"] for sb in api.list_sandboxes()} == before, "a sandbox was created"


CHUNKED_BODY = b"2\r\n{}\r\n0\r\n\r\n"


@pytest.mark.parametrize("headers", [
    [(b"Transfer-Encoding", b"chunked"), (b"Transfer-Encoding", b"identity")],
    [(b"Transfer-Encoding", b"chunked"), (b"Transfer-Encoding", b"chunked")],
    [(b"Transfer-Encoding", b"gzip, chunked")],
    [(b"Transfer-Encoding", b"chunked, chunked")],
    [(b"Transfer-Encoding", b"identity")],
    [(b"Transfer-Encoding", b"gzip")],
], ids=["chunked-then-identity", "chunked-twice", "gzip-chunked", "chunked-chunked-list",
        "identity", "gzip"])
def test_transfer_coding_other_than_one_chunked_is_refused(api, isolad, headers):
    """RFC 9112 6.1: isolad decodes only `chunked`; libmicrohttpd reads the first
    Transfer-Encoding header alone, so a proxy before isolad could frame the body one way
    and isolad another. More than one header, or any coding but a single `chunked`: 400
    naming the header, and nothing is created."""
    before = {sb["id"] for sb in api.list_sandboxes()}
    status, body, _ = raw(isolad.socket, post(CHUNKED_BODY,
                                              [(b"Content-Type", b"application/json")] + headers))
    assert status == 400, (status, body)
    err = json.loads(body)
    assert err["code"] == "invalid" and "Transfer-Encoding" in err["message"], err
    assert {sb["id"] for sb in api.list_sandboxes()} == before, "a sandbox was created"


def test_single_chunked_body_is_accepted(api, isolad):
    """The one coding isolad takes still works (any case): a chunked create answers 201."""
    status, body, _ = raw(isolad.socket, post(CHUNKED_BODY, [
        (b"Content-Type", b"application/json"), (b"Transfer-Encoding", b"Chunked")]))
    assert status == 201, (status, body)
    assert api.delete_sandbox(json.loads(body)["id"]).status == 204


def test_bad_content_length_values(isolad):
    for v in (b"-5", b"abc", b"1e3", b"99999999999999999999999"):
        status, _, _ = raw(isolad.socket, post(b"{}", [(b"Content-Length", v)]))
        assert status in (400, 413), (v, status)


def test_content_length_shorter_than_the_body(api, isolad):
    """The bytes past Content-Length are a second request on the connection, parsed and
    refused as one; they never leak into the first body."""
    before = {sb["id"] for sb in api.list_sandboxes()}
    status, body, _ = raw(isolad.socket, post(b'{}{"labels":{"a":"1"}}', [
        (b"Content-Type", b"application/json"), (b"Content-Length", b"2")]))
    # {} is a valid (default) create; what follows must not have been part of it.
    assert status == 201, (status, body)
    sid = json.loads(body)["id"]
    try:
        sb = api.get_json(f"/v1/sandboxes/{sid}")
        assert sb["labels"] == {}, sb
    finally:
        api.delete_sandbox(sid)
    assert {s["id"] for s in api.list_sandboxes()} == before


def test_json_nesting_limit(api):
    for depth, ok in ((32, True), (33, False), (10000, False)):
        body = '{"labels":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"
        r = api.request("POST", "/v1/sandboxes", body=body,
                        headers={"Content-Type": "application/json"})
        assert r.status == 400, r  # labels must be an object either way
        nested = "nested deeper" in r.error_message
        assert nested != ok, (depth, r.error_message)


@pytest.mark.parametrize("kind", ["body-never-finished", "headers-never-finished",
                                  "silent-after-connect"])
def test_slow_client_is_bounded_and_others_are_served(slow_isolad, kind):
    """A client that stalls holds one connection until the idle timeout, never longer, and
    every other client is answered meanwhile."""
    req = {
        "body-never-finished": post(b'{"labels":', [(b"Content-Type", b"application/json"),
                                                      (b"Content-Length", b"1000")]),
        "headers-never-finished": b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nX-a: b\r\n",
        "silent-after-connect": b"",
    }[kind]
    api = slow_isolad.client(timeout=10)
    result = {}

    def stall():
        try:
            result["r"] = raw(slow_isolad.socket, req, timeout=IDLE + 10, hold=True)
        except AssertionError as e:
            result["e"] = e

    stallers = [threading.Thread(target=stall) for _ in range(20)]
    for t in stallers:
        t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    for _ in range(10):
        still_serving(api)
    assert time.monotonic() - t0 < 5, "other clients waited behind the stalled ones"
    for t in stallers:
        t.join(IDLE + 15)
        assert not t.is_alive()
    assert "e" not in result, result["e"]
    status, _, took = result["r"]
    assert status in (None, 408), f"a stalled request got {status}"
    assert took <= IDLE + 3, f"a stalled connection was held {took:.1f}s (idle timeout {IDLE}s)"
    # Nothing was created from the half request.
    assert api.list_sandboxes() == []
    still_serving(api)


def test_slow_client_on_tcp_needs_the_token_first(isolad):
    """On TCP, a client without the token is refused before its body matters."""
    s = socket.create_connection(isolad.tcp, timeout=5)
    try:
        s.sendall(post(b"{", [(b"Content-Type", b"application/json"),
                              (b"Content-Length", b"1000")]))
        data = s.recv(4096)
    finally:
        s.close()
    assert data.startswith(b"HTTP/1.1 401"), data[:100]
