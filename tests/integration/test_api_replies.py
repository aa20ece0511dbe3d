# SPDX-License-Identifier: Apache-2.0
"""The API's hand-built replies (the ones that add a header to a JSON error): 401 with
WWW-Authenticate, 405 with Allow, 416 with Content-Range, and an upload the agent refuses while
the body still streams. Pinned so the shared JSON-response code behind them stays the same."""

import json


def _json_error(r, status, code):
    assert r.status == status, r
    assert r.headers.get("Content-Type") == "application/json", r.headers
    body = json.loads(r.body)
    assert body["code"] == code and body["message"], body


def test_401_names_the_scheme(isolad):
    r = isolad.tcp_client().request("GET", "/v1/sandboxes")
    _json_error(r, 401, "unauthorized")
    assert r.headers.get("WWW-Authenticate") == 'Bearer realm="isola"', r.headers


def test_405_lists_the_allowed_methods(api):
    r = api.request("PATCH", "/v1/sandboxes")
    _json_error(r, 405, "method_not_allowed")
    allow = {m.strip() for m in r.headers.get("Allow", "").split(",")}
    assert {"GET", "POST"} <= allow, r.headers


def test_416_is_json_with_the_size(api, sandbox):
    sid = sandbox["id"]
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files", query={"path": "/tmp/r"},
                    body=b"x" * 10)
    assert r.status in (200, 201, 204), r
    r = api.request("GET", f"/v1/sandboxes/{sid}/files", query={"path": "/tmp/r"},
                    headers={"Range": "bytes=10-20"})
    _json_error(r, 416, "range_not_satisfiable")
    assert r.headers.get("Content-Range") == "bytes */10", r.headers


def test_upload_refused_mid_body(api, sandbox):
    """A destination the agent refuses at open: the refusal arrives while the body streams
    and is the reply; nothing is written."""
    sid = sandbox["id"]
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files", query={"path": "/proc/version"},
                    body=b"y" * (4 << 20))
    assert 400 <= r.status < 500, r
    assert r.headers.get("Content-Type") == "application/json", r.headers
    assert json.loads(r.body)["code"], r
    out = api.exec(sid, cmd=["cat", "/proc/version"])["stdout"]
    assert "yyyy" not in out
