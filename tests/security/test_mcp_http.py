# SPDX-License-Identifier: Apache-2.0
"""isolad's /mcp (MCP Streamable HTTP, src/isolad/api/mcphttp.c) against hostile callers over
raw HTTP: no or a wrong token (401, no session made), a foreign or DNS-rebinding Origin (403
even with the right token), a session used or ended with another token (404, and it still works
for its own), unguessable session ids, the body cap and the per-token session cap.
The SDK-level behaviour is tests/mcp/http.test.mjs."""

import http.client
import json
import os
import re
import time

import pytest


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "sec", "version": "0"}}}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


def req(isolad, method, path, body=None, headers=None, raw_body=None):
    c = http.client.HTTPConnection(*isolad.tcp, timeout=60)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    h.update(headers or {})
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    out = (r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read())
    c.close()
    return out


def bearer(tok):
    return {"Authorization": f"Bearer {tok}"}


def new_token(isolad, tenant, role="user"):
    st, _, body = req(isolad, "POST", "/v1/tenants", {"name": tenant}, bearer(isolad.token))
    assert st in (201, 409), body
    st, _, body = req(isolad, "POST", "/v1/tokens", {"tenant": tenant, "role": role},
                      bearer(isolad.token))
    assert st == 201, body
    return json.loads(body)["token"]


def init(isolad, tok):
    st, h, body = req(isolad, "POST", "/mcp", INIT, bearer(tok))
    assert st == 200, body
    return h["mcp-session-id"]


def delete(isolad, tok, sid):
    return req(isolad, "DELETE", "/mcp", headers={**bearer(tok), "Mcp-Session-Id": sid})[0]


def opened(isolad):
    return len(re.findall(r"mcp: session \w+ opened", isolad.log_text()))


def test_no_or_wrong_token_is_401_and_makes_no_session(isolad):
    before = opened(isolad)
    for h in ({}, bearer("wrong"), bearer(isolad.token + "x"), {"Authorization": isolad.token}):
        st, hdr, _ = req(isolad, "POST", "/mcp", INIT, h)
        assert st == 401, h
        assert hdr["www-authenticate"].startswith("Bearer")
        st, _, _ = req(isolad, "DELETE", "/mcp", headers={**h, "Mcp-Session-Id": "0" * 64})
        assert st == 401
    assert opened(isolad) == before, "an unauthenticated initialize made a session"


@pytest.mark.parametrize("origin,host", [
    ("http://rebind.example:{port}", "rebind.example:{port}"),  # DNS rebinding: both agree
    ("http://evil.example", "127.0.0.1:{port}"),
    ("http://127.0.0.1:1", "127.0.0.1:{port}"),
    ("null", "127.0.0.1:{port}"),
])
def test_foreign_origin_is_403_even_with_the_token(isolad, origin, host):
    before = opened(isolad)
    port = isolad.port
    h = {**bearer(isolad.token), "Origin": origin.format(port=port), "Host": host.format(port=port)}
    st, _, body = req(isolad, "POST", "/mcp", INIT, h)
    assert st == 403, body
    assert b"Origin" in body
    assert opened(isolad) == before


def test_session_is_bound_to_its_token(isolad):
    a = new_token(isolad, "mcpseca")
    b = new_token(isolad, "mcpsecb")
    sid = init(isolad, a)
    assert re.fullmatch(r"[0-9a-f]{64}", sid), sid
    assert init(isolad, a) != sid
    for tok in (b, isolad.token):
        st, _, _ = req(isolad, "POST", "/mcp", PING, {**bearer(tok), "Mcp-Session-Id": sid})
        assert st == 404
        assert delete(isolad, tok, sid) == 404
    # Over the unix socket (the operator) the TCP session is not reachable either.
    c = isolad.client()
    assert c.request("POST", "/mcp", json=PING, headers={"Mcp-Session-Id": sid}).status == 404
    st, _, body = req(isolad, "POST", "/mcp", PING, {**bearer(a), "Mcp-Session-Id": sid})
    assert st == 200 and json.loads(body)["result"] == {}
    assert delete(isolad, a, sid) == 204
    assert delete(isolad, a, sid) == 404


def test_body_cap_and_session_cap(isolad):
    tok = new_token(isolad, "mcpseccap")
    st, _, body = req(isolad, "POST", "/mcp", headers={**bearer(tok), "Content-Length": str(17 << 20)},
                      raw_body=b"")
    assert st == 413, body
    sids = []
    try:
        for _ in range(16):
            sids.append(init(isolad, tok))
        st, _, body = req(isolad, "POST", "/mcp", INIT, bearer(tok))
        assert st == 429, body
        assert b"at most 16 per token" in body
        # Another token is not held up by this one's sessions.
        other = init(isolad, new_token(isolad, "mcpseccap2"))
        assert other
    finally:
        for sid in sids:
            delete(isolad, tok, sid)
    sids = [init(isolad, tok)]
    delete(isolad, tok, sids[0])


def sse_answer(body):
    """The JSON-RPC answer in an SSE or JSON body."""
    text = body.decode()
    if text.startswith("{"):
        return json.loads(text)
    data = [ln[6:] for ln in text.splitlines() if ln.startswith("data: ")]
    return json.loads(data[-1])


def test_idle_session_expires_and_its_sandbox_goes(extra_isolad):
    """A session left without DELETE (a client that died) expires after the idle time (2 s
    here through ISOLA_TEST_MCP_IDLE_S; 30 min by default): 404 afterwards, and its default
    sandbox is destroyed. A session with a call running does not expire meanwhile."""
    d = extra_isolad(extra_env={"ISOLA_TEST_MCP_IDLE_S": "2"})
    tok = d.token
    sid = init(d, tok)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "sandbox_run_command", "arguments": {"command": "sleep 5; echo up"}}}
    st, _, body = req(d, "POST", "/mcp", call, {**bearer(tok), "Mcp-Session-Id": sid})
    assert st == 200, body
    ans = sse_answer(body)
    assert "up" in ans["result"]["content"][0]["text"], "the 5 s call outlived a 2 s idle time"
    box = ans["result"]["structuredContent"]["sandbox_id"]
    assert d.client().request("GET", f"/v1/sandboxes/{box}").status == 200
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "ended (idle)" in d.log_text():
            break
        time.sleep(0.2)
    assert "ended (idle)" in d.log_text(), "the idle session never expired"
    st, _, _ = req(d, "POST", "/mcp", PING, {**bearer(tok), "Mcp-Session-Id": sid})
    assert st == 404
    assert d.client().request("GET", f"/v1/sandboxes/{box}").status in (404, 410)
