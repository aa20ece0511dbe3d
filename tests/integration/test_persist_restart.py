# SPDX-License-Identifier: Apache-2.0
"""Process-tier persistence after an isolad restart (docs/process-tier.md "Persistence"):
snapshot, hibernate + resume and fork of a sandbox that isolad re-attached after SIGTERM and
after kill -9 carry the files written before and after the restart. isolad takes the writable
layer back from the agent (pidfd_getfd, or /proc/<pid>/fd/N under a test hook) and checks its
identity: a saved identity that does not match leaves snapshot unavailable, the sandbox
running. Judged inside the sandboxes the snapshots become (the files there)."""

import json
import os
import sqlite3

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

pytestmark = pytest.mark.tiers("process")

OP_TIMEOUT = 120
BLOB = 300_000


@pytest.fixture(scope="module")
def own_isolad():
    """An isolad of this module's own: the tests restart it many times."""
    d = ROOT_CONFTEST.Isolad()
    yield d
    d.discard()


def post(api, path, status, body=None):
    r = api.request("POST", path, json=body, timeout=OP_TIMEOUT)
    assert r.status == status, f"POST {path}: {r}"
    return r.json() if r.body else None


def fill(api, sid):
    """Files of every kind the layer holds, and a whiteout over a template file. Returns
    (blob, name of the deleted template file)."""
    gone = api.sh(sid, "ls /etc | grep -v -e '^hostname$' -e '^hosts$' -e '^resolv.conf$'"
                       " | head -n1").strip()
    assert gone, "the template has no file in /etc to delete"
    api.sh(sid, "set -e; mkdir -p /root/w/d; echo one > /root/w/a; echo two > /root/w/d/b;"
                f" head -c {BLOB} /dev/urandom > /root/w/blob; ln -s a /root/w/link;"
                f" mkfifo /root/w/fifo; ln /root/w/a /root/w/hard; rm -rf /etc/{gone}",
           user="root")
    return api.read_file(sid, "/root/w/blob"), gone


def check(api, sid, blob, gone, after=None):
    out = api.sh(sid, "cat /root/w/a /root/w/d/b /root/w/hard; readlink /root/w/link;"
                      " test -p /root/w/fifo && echo fifo;"
                      f" test -e /etc/{gone} || echo gone", user="root")
    assert out == "one\ntwo\none\na\nfifo\ngone\n", out
    assert api.read_file(sid, "/root/w/blob") == blob
    if after is not None:
        assert api.sh(sid, "cat /root/w/after") == after


def disk_bytes(api, sid):
    return api.get_json(f"/v1/sandboxes/{sid}/stats")["disk_bytes"]


def snapshot_and_restore(api, sid, name):
    snap = post(api, "/v1/snapshots", 201, {"sandbox": sid, "name": name})
    kid = post(api, "/v1/sandboxes", 201, {"snapshot": name})["id"]
    return snap, kid


def test_snapshot_after_sigterm_and_kill9_restarts(own_isolad):
    d = own_isolad
    api = d.client(timeout=OP_TIMEOUT)
    sid = api.create_sandbox()["id"]
    blob, gone = fill(api, sid)
    init = ic.sandbox_init_pid(sid)
    for n, kill9 in enumerate((False, True)):
        d.restart(kill9=kill9)
        api = d.client(timeout=OP_TIMEOUT)
        assert ic.sandbox_init_pid(sid) == init, "the sandbox was recreated, not re-attached"
        # Written after the restart: the snapshot reads the live layer, not a copy.
        api.write_file(sid, "/root/w/after", f"after restart {n}\n".encode())
        # The layer is measured again (it read 0 when the fd was lost).
        assert disk_bytes(api, sid) >= BLOB
        snap, kid = snapshot_and_restore(api, sid, f"restart-{n}")
        try:
            assert snap["level"] == "files", snap
            check(api, kid, blob, gone, f"after restart {n}\n")
            assert api.sh(kid, "hostname").strip() == kid
        finally:
            api.delete_sandbox(kid)
            api.request("DELETE", f"/v1/snapshots/{snap['id']}")
        assert api.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    api.delete_sandbox(sid)


def test_hibernate_resume_after_kill9(own_isolad):
    d = own_isolad
    api = d.client(timeout=OP_TIMEOUT)
    sid = api.create_sandbox()["id"]
    blob, gone = fill(api, sid)
    d.restart(kill9=True)
    api = d.client(timeout=OP_TIMEOUT)
    assert post(api, f"/v1/sandboxes/{sid}/hibernate", 200)["state"] == "hibernated"
    assert post(api, f"/v1/sandboxes/{sid}/resume", 200)["state"] == "running"
    check(api, sid, blob, gone)
    # Resumed by this isolad: hibernate again after one more restart.
    api.write_file(sid, "/root/w/after", b"second\n")
    d.restart(kill9=False)
    api = d.client(timeout=OP_TIMEOUT)
    post(api, f"/v1/sandboxes/{sid}/hibernate", 200)
    post(api, f"/v1/sandboxes/{sid}/resume", 200)
    check(api, sid, blob, gone, "second\n")
    api.delete_sandbox(sid)


def test_fork_after_kill9(own_isolad):
    d = own_isolad
    api = d.client(timeout=OP_TIMEOUT)
    sid = api.create_sandbox()["id"]
    blob, gone = fill(api, sid)
    d.restart(kill9=True)
    api = d.client(timeout=OP_TIMEOUT)
    out = post(api, f"/v1/sandboxes/{sid}/fork", 201, {"count": 2})
    kids = [k["id"] for k in out["children"]]
    try:
        assert len(kids) == 2
        for k in kids:
            check(api, k, blob, gone)
        api.sh(kids[0], "echo mine > /root/w/a")
        assert api.sh(sid, "cat /root/w/a") == "one\n"
    finally:
        for k in kids:
            api.delete_sandbox(k)
    api.delete_sandbox(sid)


def test_proc_fallback_without_pidfd_getfd():
    """Where pidfd_getfd is refused, /proc/<agent>/fd/N is the way back; same result."""
    d = ROOT_CONFTEST.Isolad(extra_env={"ISOLA_TEST_NO_PIDFD_GETFD": "1"})
    try:
        api = d.client(timeout=OP_TIMEOUT)
        sid = api.create_sandbox()["id"]
        blob, gone = fill(api, sid)
        d.restart(kill9=True)
        api = d.client(timeout=OP_TIMEOUT)
        snap, kid = snapshot_and_restore(api, sid, "fallback")
        check(api, kid, blob, gone)
    finally:
        d.discard()


def test_identity_mismatch_leaves_snapshot_unavailable(own_isolad):
    """The saved identity of the tmpfs root is what the fd taken back must match: with it
    altered, the fd the agent holds is refused, snapshot answers `unavailable` and the
    sandbox keeps running; a log line says why."""
    d = own_isolad
    api = d.client(timeout=OP_TIMEOUT)
    sid = api.create_sandbox()["id"]
    api.write_file(sid, "/root/kept", b"kept\n")
    d.stop(kill9=True)
    db = sqlite3.connect(os.path.join(d.state_dir, "isola.db"))
    try:
        (raw,) = db.execute("SELECT tier_state FROM sandboxes WHERE id = ?", (sid,)).fetchone()
        st = json.loads(raw)
        assert st["upper"]["fd"] == 3 and int(st["upper"]["ino"]) > 0, st
        st["upper"]["ino"] = str(int(st["upper"]["ino"]) + 1)
        db.execute("UPDATE sandboxes SET tier_state = ? WHERE id = ?", (json.dumps(st), sid))
        db.commit()
    finally:
        db.close()
    d.start()
    api = d.client(timeout=OP_TIMEOUT)
    r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": "mismatch"},
                    timeout=OP_TIMEOUT)
    assert r.status == 503 and "not recovered" in r.error_message, r
    assert api.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    assert api.read_file(sid, "/root/kept") == b"kept\n"
    assert "writable layer not recovered" in d.log_text()
    assert disk_bytes(api, sid) == 0
    api.delete_sandbox(sid)


def freezer_state(sid):
    p = f"/sys/fs/cgroup/freezer/isola/{sid}/freezer.state"
    if os.path.exists(p):
        return open(p).read().strip()
    p = f"/sys/fs/cgroup/isola/{sid}/cgroup.freeze"
    return {"1": "FROZEN", "0": "THAWED"}[open(p).read().strip()]


def test_paused_sandbox_stays_frozen_through_restart_and_snapshot(own_isolad):
    """Paused, then isolad restarts: a snapshot (and a fork) of it leave it frozen, judged at
    the cgroup freezer; resume then thaws it."""
    d = own_isolad
    api = d.client(timeout=OP_TIMEOUT)
    sid = api.create_sandbox()["id"]
    blob, gone = fill(api, sid)
    assert post(api, f"/v1/sandboxes/{sid}/pause", 200)["state"] == "paused"
    assert freezer_state(sid) == "FROZEN"
    d.restart(kill9=True)
    api = d.client(timeout=OP_TIMEOUT)
    snap, kid = snapshot_and_restore(api, sid, "paused-restart")
    try:
        assert freezer_state(sid) == "FROZEN", "the snapshot thawed a paused sandbox"
        assert api.get_json(f"/v1/sandboxes/{sid}")["state"] == "paused"
        check(api, kid, blob, gone)
    finally:
        api.delete_sandbox(kid)
    out = post(api, f"/v1/sandboxes/{sid}/fork", 201, {"count": 1})
    api.delete_sandbox(out["children"][0]["id"])
    assert freezer_state(sid) == "FROZEN", "the fork thawed a paused sandbox"
    assert post(api, f"/v1/sandboxes/{sid}/resume", 200)["state"] == "running"
    assert freezer_state(sid) == "THAWED"
    assert api.sh(sid, "cat /root/w/a") == "one\n"
    api.delete_sandbox(sid)
