# SPDX-License-Identifier: Apache-2.0
"""Shared by the persistence tests: an operation the sandbox's tier cannot do must say so."""

import pytest

OP_ROUTES = {
    "pause": ("POST", "/v1/sandboxes/{id}/pause", None),
    "hibernate": ("POST", "/v1/sandboxes/{id}/hibernate", None),
    "snapshot": ("POST", "/v1/snapshots", lambda sid: {"sandbox": sid, "name": "probe-unsupported"}),
    "fork": ("POST", "/v1/sandboxes/{id}/fork", lambda sid: {"count": 1}),
}


def require_op(api, sid, op):
    """When the sandbox's `persistence[op]` is `none`, asserts that the API refuses the
    operation with 501 `not_supported` naming the tier and the operation, then skips the rest
    of the test (the tier has not implemented it yet: a skip, never a pass)."""
    sb = api.get_json(f"/v1/sandboxes/{sid}")
    if sb["persistence"][op] != "none":
        return sb["persistence"][op]
    method, path, body = OP_ROUTES[op]
    r = api.request(method, path.format(id=sid), json=body(sid) if body else None)
    assert r.status == 501 and r.error_code == "not_supported", r
    assert sb["tier"] in r.error_message and (op in r.error_message or "restore" in r.error_message), r
    pytest.skip(f"the {sb['tier']} tier does not support {op} yet (501 not_supported checked)")
