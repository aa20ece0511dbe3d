# SPDX-License-Identifier: Apache-2.0
"""Names and tombstones through HTTP (issue 15): a sandbox named at create is reachable by its
name on every route; an ended sandbox (destroyed, expired, failed) answers 410 sandbox_ended
saying why and when, is listed by ?all=true, survives an isolad restart and goes with prune or
its TTL; GET /wait blocks until the end and answers the tombstone."""

import os
import signal
import threading

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

Isolad = ROOT_CONFTEST.Isolad


def get(c, ref, sub=""):
    return c.request("GET", f"/v1/sandboxes/{ref}{sub}")


def listed(c, all_=False):
    r = c.request("GET", "/v1/sandboxes", query={"all": "true"} if all_ else None)
    assert r.status == 200, r
    return {s["id"]: s for s in r.json()["sandboxes"]}


def test_name_reaches_every_route_and_is_unique(api, make_sandbox):
    sb = make_sandbox(name="web-1.a_b", labels={"t": "names"})
    assert sb["name"] == "web-1.a_b"
    r = get(api, "web-1.a_b")
    assert r.status == 200 and r.json()["id"] == sb["id"], r
    r = api.request("POST", "/v1/sandboxes/web-1.a_b/exec", json={"cmd": ["echo", "hi"]})
    assert r.status == 200 and r.json()["stdout"] == "hi\n", r
    assert listed(api)[sb["id"]]["name"] == "web-1.a_b"
    r = api.request("POST", "/v1/sandboxes", json={"name": "web-1.a_b"})
    assert r.status == 409, r
    assert r.json()["code"] == "name_taken" and sb["id"] in r.json()["message"], r.json()
    # A name may not shadow another live sandbox's id either.
    r = api.request("POST", "/v1/sandboxes", json={"name": sb["id"]})
    assert r.status == 409 and r.json()["code"] == "name_taken", r
    for bad in ("Web", "-web", "a/b", "x" * 64, ""):
        r = api.request("POST", "/v1/sandboxes", json={"name": bad})
        assert r.status == 400, (bad, r)
        assert "name" in r.json()["message"], r.json()


def test_name_is_free_again_after_destroy(api, make_sandbox):
    a = make_sandbox(name="reuse-me")
    assert api.request("DELETE", "/v1/sandboxes/reuse-me").status == 204
    b = make_sandbox(name="reuse-me")
    assert b["id"] != a["id"]
    r = get(api, "reuse-me")
    assert r.status == 200 and r.json()["id"] == b["id"], "a name finds the live holder first"
    r = get(api, a["id"])
    assert r.status == 410 and r.json()["end_reason"] == "destroyed", r


def test_ttl_expiry_leaves_a_tombstone(api, make_sandbox):
    sb = make_sandbox(ttl=2, name="short-lived", labels={"t": "ttl"})
    r = api.request("GET", f"/v1/sandboxes/{sb['id']}/wait", query={"timeout": 120}, timeout=150)
    assert r.status == 200, r
    t = r.json()
    assert t["id"] == sb["id"] and t["state"] == "ended", t
    assert t["end_reason"] == "expired" and t["detail"] == "ttl 2s", t
    assert t["name"] == "short-lived" and t["labels"] == {"t": "ttl"}, t
    for ref in (sb["id"], "short-lived"):
        r = get(api, ref)
        assert r.status == 410, r
        e = r.json()
        assert e["code"] == "sandbox_ended" and e["end_reason"] == "expired", e
        assert "expired at" in e["message"] and "(ttl 2s) and was destroyed" in e["message"], e
        assert e["ended_at"] == t["ended_at"]
    r = api.request("POST", f"/v1/sandboxes/{sb['id']}/exec", json={"cmd": ["true"]})
    assert r.status == 410 and r.json()["code"] == "sandbox_ended", r
    assert sb["id"] not in listed(api)
    ended = listed(api, all_=True)[sb["id"]]
    assert ended["state"] == "ended" and ended["end_reason"] == "expired", ended
    r = api.request("GET", "/v1/sandboxes", query={"all": "true", "label": "t=nope"})
    assert sb["id"] not in {s["id"] for s in r.json()["sandboxes"]}, "label filter applies"


def test_wait_blocks_until_destroy(api, make_sandbox):
    sb = make_sandbox()
    r = api.request("GET", f"/v1/sandboxes/{sb['id']}/wait", query={"timeout": 0.5})
    assert r.status == 504 and r.json()["code"] == "timeout", r
    got = {}

    def waiter():
        got["r"] = api.request("GET", f"/v1/sandboxes/{sb['id']}/wait", timeout=120)

    th = threading.Thread(target=waiter)
    th.start()
    ic.wait_for(lambda: "r" not in got, 1, what="the waiter to be waiting")
    assert "r" not in got, f"wait answered while the sandbox runs: {got}"
    assert api.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 204
    th.join(120)
    r = got["r"]
    assert r.status == 200 and r.json()["end_reason"] == "destroyed", r
    assert "was destroyed at" in r.json()["message"]
    r = api.request("GET", "/v1/sandboxes/nosuchsandbox000/wait")
    assert r.status == 404, r


def test_errored_sandbox_wait_and_prune(api, make_sandbox):
    sb = make_sandbox(name="crashy")
    os.kill(ic.sandbox_init_pid(sb["id"]), signal.SIGKILL)
    r = api.request("GET", "/v1/sandboxes/crashy/wait", query={"timeout": 60}, timeout=90)
    assert r.status == 200, r
    assert r.json()["state"] == "error" and r.json()["end_reason"] == "error", r.json()
    r = api.request("POST", "/v1/sandboxes/prune", json={"states": ["error"], "older_than": 1e9})
    assert r.status == 200 and sb["id"] not in r.json()["removed"], "older_than respected"
    r = api.request("POST", "/v1/sandboxes/prune", json={"states": ["error"]})
    assert r.status == 200 and sb["id"] in r.json()["removed"], r
    assert get(api, sb["id"]).status == 404, "pruned: no tombstone kept"


def test_prune_removes_tombstones(api, make_sandbox):
    sb = make_sandbox()
    assert api.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 204
    assert get(api, sb["id"]).status == 410
    r = api.request("POST", "/v1/sandboxes/prune", json={"states": ["ended"], "older_than": 3600})
    assert r.status == 200 and sb["id"] not in r.json()["removed"], r
    r = api.request("POST", "/v1/sandboxes/prune", json={"states": ["ended"]})
    assert r.status == 200 and sb["id"] in r.json()["removed"], r
    assert get(api, sb["id"]).status == 404
    for bad in ({"states": ["running"]}, {"states": []}, {"older_than": -1}, {"x": 1}):
        r = api.request("POST", "/v1/sandboxes/prune", json=bad)
        assert r.status == 400, (bad, r)


def test_tombstones_and_names_survive_restart():
    d = Isolad()
    try:
        c = d.client()
        keep = c.create_sandbox(name="keeper")
        gone = c.create_sandbox(name="goner")
        assert c.request("DELETE", "/v1/sandboxes/goner").status == 204
        d.restart()
        r = get(c, "keeper")
        assert r.status == 200 and r.json()["id"] == keep["id"] and r.json()["name"] == "keeper"
        r = get(c, "goner")
        assert r.status == 410 and r.json()["id"] == gone["id"], r
        r = c.request("POST", "/v1/sandboxes", json={"name": "keeper"})
        assert r.status == 409, "the name is still held after the restart"
    finally:
        d.discard()


def test_tombstone_ttl_option():
    d = Isolad(extra_args=["--tombstone-ttl", "0"])
    try:
        c = d.client()
        sb = c.create_sandbox()
        assert c.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 204
        assert get(c, sb["id"]).status == 404, "--tombstone-ttl 0 keeps no record"
        assert sb["id"] not in listed(c, all_=True)
    finally:
        d.discard()


@pytest.mark.parametrize("bad", ["x", "-1", "5y", "400d"])
def test_tombstone_ttl_refuses_bad_values(bad):
    import subprocess
    cp = subprocess.run([str(ROOT_CONFTEST.ISOLAD), "--tombstone-ttl", bad], capture_output=True, text=True,
                        timeout=30)
    assert cp.returncode == 2 and f"--tombstone-ttl `{bad}`: expected a duration" in cp.stderr, cp


def test_oom_then_init_death_says_oom(api, make_sandbox, tier):
    """A sandbox whose init dies after its memory limit was hit says so: state error with the
    OOM count and limit, end_reason `oom` on /wait and in the tombstone (it said `error`)."""
    if tier != "process":
        pytest.skip("the microvm tier reports why QEMU ended instead (its own last_error)")
    sb = make_sandbox(memory="64M")
    res = api.exec(sb["id"], cmd=["python3", "-c", "b = b'x' * (256 << 20)"], timeout=60)
    assert res["oom_killed"] is True, res
    os.kill(ic.sandbox_init_pid(sb["id"]), signal.SIGKILL)
    r = api.request("GET", f"/v1/sandboxes/{sb['id']}/wait", query={"timeout": 60}, timeout=90)
    assert r.status == 200, r
    got = r.json()
    assert got["state"] == "error" and got["end_reason"] == "oom", got
    assert "1 OOM kill (memory limit 64M)" in got["detail"], got
    assert api.request("DELETE", f"/v1/sandboxes/{sb['id']}").status == 204
    t = get(api, sb["id"]).json()
    assert t["end_reason"] == "oom" and "OOM kill" in t["detail"], t
    assert "failed (sandbox init exited unexpectedly after 1 OOM kill" in t["message"], t
