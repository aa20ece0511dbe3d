# SPDX-License-Identifier: Apache-2.0
"""GET /v1/events (the web console's live table) and the console's static routes, through the
real isolad: token required, tenant-filtered, created/changed/destroyed in order."""

import http.client
import json

from tenancy_util import Tenant


def test_events_need_a_token(isolad):
    r = isolad.tcp_client().request("GET", "/v1/events")
    assert r.status == 401, r
    assert r.error_code == "unauthorized"


def test_events_follow_one_tenants_sandboxes(isolad):
    a, b = Tenant(isolad), Tenant(isolad)
    try:
        follow_one_tenant(a, b)
    finally:
        a.cleanup()
        b.cleanup()


def follow_one_tenant(a, b):
    mine = a.client.create_sandbox(template="host", labels={"who": "a"})
    ev = a.client.stream("GET", "/v1/events", kind="sse", timeout=60)
    assert ev.status == 200
    first = ev.next_event()
    assert first["type"] == "snapshot", first
    assert [s["id"] for s in first["sandboxes"]] == [mine["id"]]
    # Another tenant's sandbox never shows; this tenant's new one does.
    theirs = b.client.create_sandbox(template="host")
    other = a.client.create_sandbox(template="host")
    created = ev.read_until(lambda e: e["type"] == "created" and e["id"] == other["id"])
    assert created["sandbox"]["tenant"] == a.name
    r = a.client.request("POST", f"/v1/sandboxes/{mine['id']}/pause")
    assert r.status == 200, r
    ev.read_until(lambda e: e["type"] == "changed" and e["id"] == mine["id"] and
                  e["sandbox"]["state"] == "paused")
    assert a.client.delete_sandbox(other["id"]).status == 204
    gone = ev.read_until(lambda e: e["type"] == "destroyed" and e["id"] == other["id"])
    assert set(gone) >= {"type", "id"} and "sandbox" not in gone
    seen = {e.get("id") for e in ev.events}
    assert theirs["id"] not in seen, ev.events
    assert all(s["id"] != theirs["id"] for s in first["sandboxes"])


def test_console_assets_on_the_unix_socket(api):
    r = api.request("GET", "/")
    assert r.status == 200, r
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert b"/console/app.js" in r.body
    r = api.request("POST", "/")
    assert r.status == 405, r
    assert "Content-Security-Policy" in r.headers
    r = api.request("GET", "/console/../v1/whoami")
    assert r.status == 404, r


def test_console_files_are_not_audited(isolad, api):
    """Anyone may fetch the console's public files: like /v1/health they must not grow the
    audit trail; the API calls the console then makes are audited as usual."""
    anon = isolad.tcp_client()
    for path in ("/", "/console/app.js", "/console/nosuchfile"):
        anon.request("GET", path)
    api.request("GET", "/v1/sandboxes/consolemark0000")
    r = api.request("GET", "/v1/audit/export")
    assert r.status == 200, r
    records = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert any(x["target"] == "consolemark0000" for x in records), records[-5:]
    assert not [x for x in records if x["action"] in ("GET /", "GET /console/app.js",
                                                      "GET /console/nosuchfile")]


def ws_handshake(addr, path, protocols):
    """Status and headers of a WebSocket upgrade offering `protocols`, no Authorization."""
    conn = http.client.HTTPConnection(*addr, timeout=30)
    conn.request("GET", path, headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": protocols})
    resp = conn.getresponse()
    status, headers = resp.status, dict(resp.getheaders())
    conn.close()
    return status, headers


def test_websocket_token_in_the_subprotocol(isolad):
    """A browser's WebSocket carries the token as `isola.bearer.<token>` (docs/console.md):
    accepted on the attach route only, never echoed; anywhere else it is no credential."""
    t = Tenant(isolad)
    try:
        sb = t.client.create_sandbox(template="host")
        pid = t.client.start_process(sb["id"], cmd=["sleep", "60"])["pid"]
        path = f"/v1/sandboxes/{sb['id']}/processes/{pid}/ws"
        status, headers = ws_handshake(isolad.tcp, path, f"isola, isola.bearer.{t.token}")
        assert status == 101, (status, headers)
        assert headers.get("Sec-WebSocket-Protocol") == "isola", headers
        status, _ = ws_handshake(isolad.tcp, path, "isola, isola.bearer.not-a-token")
        assert status == 401
        # Only the attach route reads the subprotocol.
        conn = http.client.HTTPConnection(*isolad.tcp, timeout=30)
        conn.request("GET", "/v1/whoami", headers={"Sec-WebSocket-Protocol": f"isola.bearer.{t.token}"})
        assert conn.getresponse().status == 401
        conn.close()
        # A read-only token still may not attach (it writes stdin).
        status, _ = ws_handshake(isolad.tcp, path, f"isola, isola.bearer.{t.new_token('read-only')}")
        assert status == 403
    finally:
        t.cleanup()
