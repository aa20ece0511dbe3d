# SPDX-License-Identifier: Apache-2.0
"""Sandbox CRUD over the native API: create/get/list/delete, defaults, and input validation
that fails cleanly (right status, a message naming the field, nothing left half-done)."""

import os
import time

import pytest

import isola_client as ic

MiB = 1 << 20
GiB = 1 << 30


def ids(sandboxes):
    return sorted(sb["id"] for sb in sandboxes)


def state_entries(isolad):
    d = os.path.join(isolad.state_dir, "sandboxes")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_health(api):
    r = api.request("GET", "/v1/health")
    assert r.status == 200, r
    assert isinstance(r.json(), dict)


def test_doctor(api):
    r = api.request("GET", "/v1/doctor")
    assert r.status == 200, r
    doc = r.json()
    assert isinstance(doc, dict) and doc, doc


@pytest.mark.tiers("process", "microvm")
def test_create_reports_defaults(api, make_sandbox, tier):
    before = time.time()
    sb = make_sandbox()
    assert sb["state"] == "running", sb
    assert sb["tier"] == tier
    assert sb["template"] == "host"
    assert sb["cpu"] == 1
    assert sb["memory"] == 256 * MiB
    assert sb["disk"] == 1 * GiB
    assert sb["labels"] == {}
    # One level per operation (docs/persistence.md).
    assert set(sb["persistence"]) == {"stop", "pause", "hibernate", "snapshot", "fork"}
    assert all(v in ("none", "files", "files+memory") for v in sb["persistence"].values())
    assert sb["expires_at"] is None, "no TTL was asked for and the default is none"
    assert before - 5 <= sb["created_at"] <= time.time() + 5, sb["created_at"]
    got = api.get_json(f"/v1/sandboxes/{sb['id']}")
    assert got["id"] == sb["id"] and got["state"] == "running"
    for k in ("tier", "template", "cpu", "memory", "disk", "labels", "created_at",
              "expires_at", "persistence"):
        assert got[k] == sb[k], (k, got[k], sb[k])


def test_create_with_limits_and_labels(api, make_sandbox):
    sb = make_sandbox(cpu=0.5, memory="256M", disk="2G", pids=64, labels={"team": "ml", "x": "1"},
                      env={"FOO": "bar"}, workdir="/tmp", ttl=600)
    assert sb["cpu"] == 0.5
    assert sb["memory"] == 256 * MiB
    assert sb["disk"] == 2 * GiB
    assert sb["labels"] == {"team": "ml", "x": "1"}
    assert sb["expires_at"] is not None
    assert 590 <= sb["expires_at"] - sb["created_at"] <= 610, sb
    # The limits are applied, judged from the host's cgroupfs where we can read them.
    for d in ic.cgroup_dirs(sb["id"]):
        lim = os.path.join(d, "memory.limit_in_bytes")
        if os.path.exists(lim):
            assert int(open(lim).read()) == 256 * MiB
        lim = os.path.join(d, "memory.max")
        if os.path.exists(lim):
            assert int(open(lim).read()) == 256 * MiB
        lim = os.path.join(d, "pids.max")
        if os.path.exists(lim):
            assert open(lim).read().strip() == "64"


def test_list_and_label_filter(api, make_sandbox):
    a = make_sandbox(labels={"team": "a", "env": "ci"})
    b = make_sandbox(labels={"team": "b", "env": "ci"})
    all_ids = ids(api.list_sandboxes())
    assert a["id"] in all_ids and b["id"] in all_ids
    assert ids(api.list_sandboxes({"label": "team=a"})) == [a["id"]]
    assert ids(api.list_sandboxes({"label": "team=b"})) == [b["id"]]
    got = ids(api.list_sandboxes({"label": "env=ci"}))
    assert a["id"] in got and b["id"] in got
    # Several label filters all apply.
    assert ids(api.list_sandboxes([("label", "env=ci"), ("label", "team=b")])) == [b["id"]]
    assert ids(api.list_sandboxes({"label": "team=nobody"})) == []


def test_bad_label_filter(api):
    r = api.request("GET", "/v1/sandboxes", query={"label": "novalue"})
    assert r.status == 400, r
    assert r.error_code == "invalid"
    assert "label" in r.error_message


def test_delete(api, make_sandbox, isolad):
    sb = make_sandbox()
    sid = sb["id"]
    r = api.delete_sandbox(sid)
    assert r.status == 204, r
    assert r.body == b""
    r = api.request("GET", f"/v1/sandboxes/{sid}")
    assert r.status == 410, r  # its tombstone says it was destroyed (test_tombstones.py)
    assert r.error_code == "sandbox_ended" and sid in r.error_message
    assert sid not in ids(api.list_sandboxes())
    assert sid not in state_entries(isolad)
    assert api.delete_sandbox(sid).status == 410
    assert api.request("GET", "/v1/sandboxes/nosuchsandbox000").status == 404


BAD_CREATES = [
    # (description, raw body, status, code, words the message must name)
    ("malformed JSON", b'{"cpu": ', 400, "invalid", ["json"]),
    ("not an object", b'[1,2]', 400, "invalid", []),
    ("unknown field", b'{"bogus_field": 1}', 400, "invalid", ["bogus_field"]),
    ("bad memory string", b'{"memory": "lots"}', 400, "invalid", ["memory"]),
    ("negative memory", b'{"memory": "-5M"}', 400, "invalid", ["memory"]),
    ("bad disk", b'{"disk": "12Q"}', 400, "invalid", ["disk"]),
    ("cpu wrong type", b'{"cpu": "fast"}', 400, "invalid", ["cpu"]),
    ("cpu negative", b'{"cpu": -1}', 400, "invalid", ["cpu"]),
    ("pids wrong type", b'{"pids": "many"}', 400, "invalid", ["pids"]),
    ("env not an object", b'{"env": ["A=1"]}', 400, "invalid", ["env"]),
    ("label value not a string", b'{"labels": {"k": 1}}', 400, "invalid", ["label"]),
    ("ttl negative", b'{"ttl": -3}', 400, "invalid", ["ttl"]),
    ("tier bogus", b'{"tier": "bogus"}', 400, "invalid", ["tier", "bogus"]),
    ("unknown template", b'{"template": "no-such-template-xyz"}', 404, "not_found",
     ["no-such-template-xyz"]),
    ("deep nesting", b'{"labels": ' + b"[" * 100000 + b"]" * 100000 + b"}", 400, "invalid", []),
]


@pytest.mark.host_exclusive  # every isola cgroup on the host
@pytest.mark.parametrize("desc,body,status,code,words", BAD_CREATES,
                         ids=[c[0] for c in BAD_CREATES])
def test_create_rejects_bad_input(api, isolad, desc, body, status, code, words):
    before = ids(api.list_sandboxes())
    before_state = state_entries(isolad)
    before_cg = ic.cgroup_dirs()
    r = api.request("POST", "/v1/sandboxes", body=body,
                    headers={"Content-Type": "application/json"})
    assert r.status == status, f"{desc}: {r}"
    err = r.json()
    assert set(err) >= {"code", "message"}, err
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"].strip(), err
    for w in words:
        assert w.lower() in err["message"].lower(), f"{desc}: message should name `{w}`: {err}"
    # Nothing half-done.
    assert ids(api.list_sandboxes()) == before
    assert state_entries(isolad) == before_state
    assert ic.cgroup_dirs() == before_cg


def test_create_body_over_1mib_is_413(api, isolad):
    before = ids(api.list_sandboxes())
    body = b'{"labels": {"k": "' + b"x" * (1 << 20) + b'"}}'
    r = api.request("POST", "/v1/sandboxes", body=body,
                    headers={"Content-Type": "application/json"})
    assert r.status == 413, r
    assert r.error_code == "too_large"
    assert ids(api.list_sandboxes()) == before
    # The daemon still serves after refusing.
    assert api.request("GET", "/v1/health").status == 200


def test_create_empty_body_gives_defaults(api, make_sandbox):
    # POST with no body at all is the same as {} (the CLI's bare `isola create`).
    r = api.request("POST", "/v1/sandboxes", body=b"")
    assert r.status in (201, 400), r
    if r.status == 201:
        api.delete_sandbox(r.json()["id"])
    else:
        assert r.error_code == "invalid"


@pytest.fixture(scope="module")
def gone_id(isolad):
    """A well-formed id that no longer exists."""
    c = isolad.client()
    sb = c.create_sandbox()
    assert c.delete_sandbox(sb["id"]).status == 204
    return sb["id"]


PER_SANDBOX_ROUTES = [
    ("GET", "", None, None),
    ("DELETE", "", None, None),
    ("POST", "/timeout", {"ttl": 60}, None),
    ("POST", "/exec", {"cmd": ["true"]}, None),
    ("POST", "/processes", {"cmd": ["true"]}, None),
    ("GET", "/processes", None, None),
    ("GET", "/processes/1", None, None),
    ("GET", "/processes/1/output", None, None),
    ("POST", "/processes/1/stdin", b"x", None),
    ("POST", "/processes/1/close-stdin", None, None),
    ("POST", "/processes/1/signal", {"signal": "TERM"}, None),
    ("POST", "/processes/1/resize", {"cols": 80, "rows": 24}, None),
    ("POST", "/processes/1/wait", None, {"timeout": 1}),
    ("GET", "/processes/1/ws", None, None),
    ("GET", "/files", None, {"path": "/etc/hostname"}),
    ("PUT", "/files", b"data", {"path": "/tmp/x"}),
    ("GET", "/fs/list", None, {"path": "/"}),
    ("GET", "/fs/stat", None, {"path": "/"}),
    ("POST", "/fs/mkdir", {"path": "/tmp/d", "parents": True}, None),
    ("POST", "/fs/rename", {"from": "/tmp/a", "to": "/tmp/b"}, None),
    ("POST", "/fs/remove", {"path": "/tmp/a", "recursive": True}, None),
    ("GET", "/archive", None, {"path": "/tmp"}),
    ("PUT", "/archive", b"\0" * 1024, {"path": "/tmp"}),
]


@pytest.mark.parametrize("method,suffix,body,query", PER_SANDBOX_ROUTES,
                         ids=[f"{m} {s or '/'}" for m, s, _, _ in PER_SANDBOX_ROUTES])
def test_ended_sandbox_is_410_everywhere(api, gone_id, method, suffix, body, query):
    if suffix.endswith("/ws"):
        with pytest.raises(ic.WebSocketError) as e:
            ic.WebSocket.connect(api, f"/v1/sandboxes/{gone_id}{suffix}")
        assert getattr(e.value, "status", None) == 410, e.value
        assert gone_id.encode() in e.value.body
        return
    kw = {"query": query}
    if isinstance(body, dict):
        kw["json"] = body
    elif body is not None:
        kw["body"] = body
    r = api.request(method, f"/v1/sandboxes/{gone_id}{suffix}", **kw)
    assert r.status == 410, f"{method} {suffix}: {r}"
    assert r.error_code == "sandbox_ended", r
    assert gone_id in r.error_message and "was destroyed at" in r.error_message, r


def test_unknown_route_is_404_json(api):
    r = api.request("GET", "/v1/no-such-thing")
    assert r.status == 404, r
    assert r.error_code == "not_found"


def test_wrong_method_is_rejected(api, sandbox):
    r = api.request("PATCH", f"/v1/sandboxes/{sandbox['id']}", json={})
    assert r.status in (404, 405), r
    assert "code" in r.json()


def test_process_tier_has_no_console(api, sandbox):
    r = api.request("GET", f"/v1/sandboxes/{sandbox['id']}/console")
    assert r.status == 501 and r.error_code == "not_supported", r
    assert "console" in r.error_message
    r = api.request("GET", "/v1/sandboxes/nosuchsandbox/console")
    assert r.status == 404, r


# ---- limits as a command inside sees them (both tiers promise the same) ----



@pytest.mark.tiers("process", "microvm")
def test_disk_limit_inside(api, make_sandbox, tier, isolad):
    """df shows about the `disk` allowance free, and a write past it stops near it."""
    sb = make_sandbox(disk="128M")
    sid = sb["id"]
    avail_kib = int(api.sh(sid, "df -Pk / | tail -1").split()[3])
    assert 0.85 * 128 * 1024 <= avail_kib <= 1.15 * 128 * 1024, avail_kib
    res = api.exec(sid, command="dd if=/dev/zero of=/root/big bs=1M count=256", timeout=120)
    assert res["exit_code"] != 0 or res["signal"], res
    size = int(api.sh(sid, "stat -c %s /root/big"))
    assert 64 << 20 <= size <= 1.15 * (128 << 20), size
    if tier == "microvm":
        # Judged on the host too: what the guest wrote is in its qcow2 overlay, which holds
        # about the allowance (the template image's own free space no longer adds to it).
        api.sh(sid, "sync")
        overlay = os.path.join(isolad.state_dir, "sandboxes", sid, "vm", "disk.qcow2")
        used = os.stat(overlay).st_blocks * 512
        assert used <= 1.15 * (128 << 20) + (16 << 20), used


@pytest.mark.tiers("process", "microvm")
def test_pids_limit_inside(api, make_sandbox, tier):
    """With pids=32, a command cannot have 50 processes at once."""
    sb = make_sandbox(pids=32)
    sid = sb["id"]
    res = api.exec(sid, command="i=0; while [ $i -lt 50 ]; do sleep 30 & i=$((i+1)); done; "
                   "sleep 1; ls /proc | grep -c '^[0-9]'; pkill sleep; true", timeout=120)
    n = int(res["stdout"].split()[0]) if res["stdout"].strip() else 0
    assert n <= 32 and "fork" in res["stderr"].lower(), res
