# SPDX-License-Identifier: Apache-2.0
"""fork (docs/persistence.md): N children from one snapshot of a running sandbox, each with the
source's files and a fresh identity (hostname, machine id, RNG) before user code runs; the
children's writes are their own; quotas count every child; kill -9 mid-fork leaves every
sandbox live or gone and no fork snapshot behind."""

import json
import os
import subprocess
import threading
import time

import pytest

from persist_util import require_op
from tenancy_util import ROOT_CONFTEST, Tenant

CLI = ROOT_CONFTEST.CLI
OP_TIMEOUT = 300

pytestmark = pytest.mark.tiers("process", "microvm")


def fork(c, sid, count, status=201):
    r = c.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": count}, timeout=OP_TIMEOUT)
    assert r.status == status, f"fork {sid} x{count}: {r}"
    return r.json()


def test_fork_children_state_identity_isolation(isolad, api, make_sandbox, tier):
    src = make_sandbox(labels={"job": "x"})["id"]
    require_op(api, src, "fork")
    api.sh(src, "mkdir -p /root/w && echo source > /root/w/f && "
                "head -c 100000 /dev/urandom > /root/w/blob")
    blob = api.read_file(src, "/root/w/blob")
    out = fork(api, src, 3)
    kids = [k["id"] for k in out["children"]]
    try:
        assert out["source"] == src and len(kids) == 3 and len(set(kids)) == 3
        assert isinstance(out["paused_us"], int) and out["paused_us"] >= 0
        print(f"fork x3 ({tier}): source paused {out['paused_us']} us")
        for k in out["children"]:
            assert k["forked_from"] == src and k["state"] == "running", k
            assert k["labels"] == {"job": "x"} and k["tier"] == tier, k
        # The source is running and unchanged.
        assert api.get_json(f"/v1/sandboxes/{src}")["state"] == "running"
        for k in kids:
            assert api.sh(k, "cat /root/w/f") == "source\n"
            assert api.read_file(k, "/root/w/blob") == blob
        # Fresh identity: hostname is the child's id; RNG output differs between children.
        hosts = [api.sh(k, "hostname").strip() for k in kids]
        assert hosts == kids
        rnd = [api.sh(k, "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'") for k in kids]
        assert len(set(rnd)) == 3 and all(len(r) == 64 for r in rnd), rnd
        # Writes stay in their sandbox.
        api.sh(kids[0], "echo zero > /root/w/f")
        api.sh(src, "echo src2 > /root/w/f")
        assert api.sh(kids[1], "cat /root/w/f") == "source\n"
        assert api.sh(kids[2], "cat /root/w/f") == "source\n"
        assert api.sh(kids[0], "cat /root/w/f") == "zero\n"
        # The fork snapshot is internal: never listed.
        assert not [s for s in api.get_json("/v1/snapshots")["snapshots"]
                    if s["id"] == out["snapshot"]]
        # Children survive the source.
        assert api.request("DELETE", f"/v1/sandboxes/{src}").status == 204
        assert api.sh(kids[1], "cat /root/w/f") == "source\n"
    finally:
        for k in kids:
            api.delete_sandbox(k)
    # Once no child needs it, the fork snapshot is gone from disk.
    assert not os.path.exists(os.path.join(isolad.state_dir, "snapshots", out["snapshot"]))


def test_fork_of_paused_source_stays_paused(api, make_sandbox):
    src = make_sandbox()["id"]
    require_op(api, src, "fork")
    require_op(api, src, "pause")
    api.sh(src, "echo p > /root/p")
    assert api.request("POST", f"/v1/sandboxes/{src}/pause").status == 200
    out = fork(api, src, 1)
    kid = out["children"][0]["id"]
    try:
        assert api.get_json(f"/v1/sandboxes/{src}")["state"] == "paused"
        assert api.sh(kid, "cat /root/p") == "p\n"
    finally:
        api.delete_sandbox(kid)


def test_fork_rules(api, make_sandbox):
    src = make_sandbox()["id"]
    require_op(api, src, "fork")
    for bad in (0, 65, "two"):
        r = api.request("POST", f"/v1/sandboxes/{src}/fork", json={"count": bad})
        assert r.status == 400, (bad, r)
    r = api.request("POST", "/v1/sandboxes/nosuchsandbox/fork", json={"count": 1})
    assert r.status == 404, r
    api.request("POST", f"/v1/sandboxes/{src}/hibernate", timeout=OP_TIMEOUT)
    r = api.request("POST", f"/v1/sandboxes/{src}/fork", json={"count": 1})
    assert r.status == 409 and "hibernated" in r.error_message, r


@pytest.mark.process_only("quota accounting is tier-independent")
def test_fork_children_count_against_quota(isolad):
    t = Tenant(isolad, max_sandboxes=3)
    try:
        src = t.client.create_sandbox()["id"]
        r = t.client.request("POST", f"/v1/sandboxes/{src}/fork", json={"count": 3},
                             timeout=OP_TIMEOUT)
        assert r.status == 403 and r.error_code == "quota_exceeded", r
        # All or nothing: no child of the refused fork is left.
        assert [s["id"] for s in t.client.list_sandboxes()] == [src]
        out = fork(t.client, src, 2)
        assert len(out["children"]) == 2
        assert len(t.client.list_sandboxes()) == 3
    finally:
        t.cleanup()


def test_fork_audit_names_children(isolad, api, make_sandbox):
    src = make_sandbox()["id"]
    require_op(api, src, "fork")
    out = fork(api, src, 2)
    kids = sorted(k["id"] for k in out["children"])
    for k in kids:
        api.delete_sandbox(k)
    cp = subprocess.run([str(CLI), "--socket", isolad.socket, "audit", "export"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert cp.returncode == 0, cp
    recs = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    hits = [r for r in recs if r.get("action") == "sandbox.fork" and r.get("target") == src]
    assert hits, recs[-5:]
    assert sorted(hits[-1]["detail"]["children"]) == kids
    assert hits[-1]["detail"]["snapshot"] == out["snapshot"]


@pytest.mark.process_only("kill -9 timing tuned to the process tier")
def test_kill9_during_fork_then_consistent(isolad, api, tier):
    src = api.create_sandbox()["id"]
    api.sh(src, "head -c 20000000 /dev/urandom > /root/big && echo s > /root/f")
    seen = {}

    def go():
        try:
            seen["r"] = isolad.client(timeout=120).request(
                "POST", f"/v1/sandboxes/{src}/fork", json={"count": 4})
        except OSError as e:
            seen["r"] = e
    t = threading.Thread(target=go)
    snapdir = os.path.join(isolad.state_dir, "snapshots")
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(n.startswith(".tmp-") for n in os.listdir(snapdir)):
            break
        time.sleep(0.002)
    time.sleep(0.05)
    isolad.stop(kill9=True)
    t.join(120)
    assert not hasattr(seen.get("r"), "status") or seen["r"].status != 201, \
        "the fork finished before the kill: the test did not hit it mid-flight"
    isolad.start()
    c = isolad.client(timeout=OP_TIMEOUT)
    # Every sandbox is live (running or paused) or cleaned up; the source runs.
    for sb in c.list_sandboxes():
        assert sb["state"] in ("running", "paused", "hibernated"), sb
        if sb["forked_from"] == src:
            assert c.sh(sb["id"], "cat /root/f") == "s\n"
    assert c.get_json(f"/v1/sandboxes/{src}")["state"] == "running"
    assert c.sh(src, "cat /root/f") == "s\n"
    # No fork snapshot or temp dir is left.
    assert not [n for n in os.listdir(snapdir) if n not in ("hibernated",)], os.listdir(snapdir)
    # Forking the same (re-attached) source works again and carries its files.
    out = fork(c, src, 1)
    assert c.sh(out["children"][0]["id"], "cat /root/f") == "s\n"
    for k in out["children"]:
        c.delete_sandbox(k["id"])
    for sb in c.list_sandboxes():
        if sb["forked_from"] == src or sb["id"] == src:
            c.delete_sandbox(sb["id"])


@pytest.mark.process_only("kill -9 timing tuned to the process tier")
def test_kill9_during_hibernate_then_consistent(isolad, api, tier):
    sid = api.create_sandbox()["id"]
    api.sh(sid, "head -c 20000000 /dev/urandom > /root/big && echo h > /root/f")
    seen = {}

    def go():
        try:
            seen["r"] = isolad.client(timeout=120).request(
                "POST", f"/v1/sandboxes/{sid}/hibernate")
        except OSError as e:
            seen["r"] = e
    hib = os.path.join(isolad.state_dir, "snapshots", "hibernated")
    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if os.path.isdir(hib) and any(n.startswith(".tmp-") for n in os.listdir(hib)):
            break
        time.sleep(0.002)
    isolad.stop(kill9=True)
    t.join(120)
    isolad.start()
    c = isolad.client(timeout=OP_TIMEOUT)
    sb = c.get_json(f"/v1/sandboxes/{sid}")
    # Either the hibernation was rolled back (running) or it completed (hibernated): both
    # keep the files, and a resume works.
    assert sb["state"] in ("running", "hibernated"), sb
    if sb["state"] == "hibernated":
        assert c.request("POST", f"/v1/sandboxes/{sid}/resume", timeout=OP_TIMEOUT).status == 200
    assert c.sh(sid, "cat /root/f") == "h\n"
    assert not [n for n in os.listdir(hib) if n.startswith(".tmp-") or n.endswith(".new")]
    c.delete_sandbox(sid)
    assert not [n for n in os.listdir(hib) if n.startswith(sid)]


@pytest.mark.tiers("process")
def test_own_hostname_kept_by_hibernate_not_by_fork(api, make_sandbox):
    """A sandbox's own `hostname` (process tier) is what its processes see, and a hibernate
    and resume keeps it; a fork child is a new sandbox and gets its own id as hostname."""
    src = make_sandbox(hostname="Build-Box.1")
    assert src["hostname"] == "Build-Box.1", src
    sid = src["id"]
    assert api.sh(sid, "hostname") == "Build-Box.1\n"
    require_op(api, sid, "hibernate")
    for op in ("hibernate", "resume"):
        r = api.request("POST", f"/v1/sandboxes/{sid}/{op}")
        assert r.status == 200, r
    assert api.sh(sid, "hostname") == "Build-Box.1\n"
    out = fork(api, sid, 1)
    kid = out["children"][0]["id"]
    try:
        assert out["children"][0]["hostname"] == kid
        assert api.sh(kid, "hostname") == f"{kid}\n"
    finally:
        api.delete_sandbox(kid)
