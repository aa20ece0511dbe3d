# SPDX-License-Identifier: Apache-2.0
"""Persistence (docs/persistence.md): reported levels, pause/resume, hibernate/resume, and the
state rules around them — judged from inside the sandbox (files, a live process's memory,
an attached output stream), never from our own replies alone."""

import threading
import time

import pytest

from persist_util import require_op

pytestmark = pytest.mark.tiers("process", "microvm")

PROCESS_LEVELS = {"stop": "none", "pause": "files+memory", "hibernate": "files",
                  "snapshot": "files", "fork": "files"}
HIBERNATE_TIMEOUT = 300


def post(api, sid, op, status=200, **kw):
    r = api.request("POST", f"/v1/sandboxes/{sid}/{op}", timeout=HIBERNATE_TIMEOUT, **kw)
    assert r.status == status, f"{op} {sid}: {r}"
    return r.json() if r.body else None


def state(api, sid):
    return api.get_json(f"/v1/sandboxes/{sid}")["state"]


def counter_loop(api, sid):
    """Starts a background shell whose loop variable lives only in its memory; it writes
    the value to /tmp/counter each step. Returns its pid."""
    p = api.start_process(sid, cmd=["sh", "-c",
                                    "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter;"
                                    " sleep 0.05; done"])
    return p["pid"]


def read_counter(api, sid):
    deadline = time.monotonic() + 10
    while True:
        out = api.exec(sid, cmd=["sh", "-c", "cat /tmp/counter 2>/dev/null; true"])["stdout"].strip()
        if out.isdigit():
            return int(out)
        assert time.monotonic() < deadline, "counter never written"
        time.sleep(0.05)


def test_levels_reported_never_more_than_the_tier(api, sandbox, tier):
    sb = api.get_json(f"/v1/sandboxes/{sandbox['id']}")
    p = sb["persistence"]
    assert set(p) == set(PROCESS_LEVELS), p
    assert p["stop"] == "none"
    if tier == "process":
        # The process tier snapshots its writable layer only: never files+memory there.
        assert p == PROCESS_LEVELS, p
    assert sb["forked_from"] is None and sb["snapshot"] is None


@pytest.mark.fresh_sandbox
def test_pause_resume_20_cycles(api, make_sandbox, tier):
    sid = make_sandbox()["id"]
    require_op(api, sid, "pause")
    api.write_file(sid, "/tmp/data.txt", b"kept across pauses\n")
    pid = counter_loop(api, sid)
    last = read_counter(api, sid)
    for cycle in range(20):
        sb = post(api, sid, "pause")
        assert sb["state"] == "paused", sb
        # Paused: the agent is stopped too, so requests are refused naming the state.
        r = api.request("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]})
        assert r.status == 409 and "paused" in r.error_message, r
        post(api, sid, "pause")  # idempotent
        assert post(api, sid, "resume")["state"] == "running"
        now = read_counter(api, sid)
        # The same process kept counting from where it was: its memory survived. A restart
        # would begin again at 1.
        assert now >= last, f"cycle {cycle}: counter went back from {last} to {now}"
        last = now
        assert api.read_file(sid, "/tmp/data.txt") == b"kept across pauses\n"
        procs = api.get_json(f"/v1/sandboxes/{sid}/processes")["processes"]
        assert any(p["pid"] == pid and p.get("running") for p in procs), procs
    # ...and it still advances after the last resume.
    time.sleep(0.5)
    assert read_counter(api, sid) > last


@pytest.mark.fresh_sandbox
def test_paused_sandbox_is_frozen_and_stream_survives(api, make_sandbox):
    """While paused nothing runs (the counter stands still); an attached output stream stalls
    and continues after resume."""
    sid = make_sandbox()["id"]
    require_op(api, sid, "pause")
    with api.stream("POST", f"/v1/sandboxes/{sid}/exec",
                    json={"cmd": ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1));"
                                  " echo tick$i; sleep 0.05; done"]}, kind="ndjson") as st:
        st.read_output_until(b"tick5", timeout=20)
        post(api, sid, "pause")
        time.sleep(1.0)
        post(api, sid, "resume")
        st.read_output_until(b"tick40", timeout=30)
    pid = counter_loop(api, sid)
    assert pid
    before = read_counter(api, sid)
    post(api, sid, "pause")
    time.sleep(1.5)  # ~30 steps if it were running
    post(api, sid, "resume")
    after = read_counter(api, sid)
    assert after - before < 20, f"counter advanced {after - before} steps while paused"


@pytest.mark.fresh_sandbox
def test_hibernate_resume_10_cycles(api, make_sandbox, tier):
    sid = make_sandbox()["id"]
    require_op(api, sid, "hibernate")
    sb = api.get_json(f"/v1/sandboxes/{sid}")
    if tier == "process":
        assert sb["persistence"]["hibernate"] == "files", sb["persistence"]
    api.sh(sid, "mkdir -p /root/work && echo base > /root/work/base.txt")
    for cycle in range(10):
        api.write_file(sid, f"/root/work/c{cycle}.txt", f"cycle {cycle}\n".encode())
        sb = post(api, sid, "hibernate")
        assert sb["state"] == "hibernated", sb
        r = api.request("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]})
        assert r.status == 409 and "hibernated" in r.error_message, r
        assert post(api, sid, "resume")["state"] == "running"
        out = api.sh(sid, "cat /root/work/base.txt /root/work/c*.txt")
        assert out == "base\n" + "".join(f"cycle {i}\n" for i in range(cycle + 1)), out
        assert api.sh(sid, "hostname").strip() == sid


@pytest.mark.fresh_sandbox
@pytest.mark.process_only("process-tier statement")
def test_hibernate_process_tier_keeps_files_not_processes(api, make_sandbox, tier):
    """The process tier says `files` for hibernate, and that is exactly what comes back:
    a background process is gone after resume, its files are there."""
    sid = make_sandbox()["id"]
    counter_loop(api, sid)
    read_counter(api, sid)
    post(api, sid, "hibernate")
    post(api, sid, "resume")
    procs = api.get_json(f"/v1/sandboxes/{sid}/processes")["processes"]
    assert not any(p.get("running") for p in procs), procs
    assert read_counter(api, sid) > 0


@pytest.mark.fresh_sandbox
def test_state_rules(api, make_sandbox):
    sid = make_sandbox()["id"]
    require_op(api, sid, "hibernate")
    require_op(api, sid, "pause")
    # resume of a running sandbox is a no-op; hibernating a hibernated one is a conflict.
    assert post(api, sid, "resume")["state"] == "running"
    post(api, sid, "hibernate")
    r = api.request("POST", f"/v1/sandboxes/{sid}/hibernate")
    assert r.status == 409 and "hibernated" in r.error_message, r
    r = api.request("POST", f"/v1/sandboxes/{sid}/pause")
    assert r.status == 409 and "hibernated" in r.error_message, r
    # files while hibernated: refused naming the state
    r = api.request("GET", f"/v1/sandboxes/{sid}/files", query={"path": "/etc/hostname"})
    assert r.status == 409 and "hibernated" in r.error_message, r
    # a hibernated or paused sandbox can be destroyed
    assert api.request("DELETE", f"/v1/sandboxes/{sid}").status == 204
    sid2 = make_sandbox()["id"]
    post(api, sid2, "pause")
    assert api.request("DELETE", f"/v1/sandboxes/{sid2}").status == 204
    assert api.request("GET", f"/v1/sandboxes/{sid2}").status == 410  # ended (tombstone)


@pytest.mark.process_only("no sandbox involved")
def test_unknown_sandbox_not_found(api):
    for op in ("pause", "resume", "hibernate"):
        r = api.request("POST", f"/v1/sandboxes/nosuchsandbox/{op}")
        assert r.status == 404 and r.error_code == "not_found", r


def test_cli_persist_commands(api, cli, make_sandbox, tier):
    """isola pause|resume|hibernate ID, snapshot create|ls|delete, create --from-snapshot,
    fork --count, each with and without --json; outcomes judged through the API and inside."""
    sid = make_sandbox()["id"]
    require_op(api, sid, "snapshot")
    api.sh(sid, "echo cli > /root/c")

    def ok(*args, json=False):
        cp = cli(*args, json=json, timeout=HIBERNATE_TIMEOUT)
        assert cp.returncode == 0, cp
        return cp.stdout.decode()

    assert ok("pause", sid) == f"{sid} paused\n"
    assert state(api, sid) == "paused"
    assert '"state": "running"' in ok("resume", sid, json=True).replace('":"', '": "')
    assert ok("hibernate", sid) == f"{sid} hibernated\n"
    assert state(api, sid) == "hibernated"
    assert ok("resume", sid) == f"{sid} running\n"
    name = f"cli-{sid[:8]}"
    assert ok("snapshot", "create", sid, name) == f"{name}\n"
    table = ok("snapshot", "ls")
    assert name in table and "files" in table and "NAME" in table.splitlines()[0]
    import json as _json
    listed = _json.loads(ok("snapshot", "ls", json=True))
    assert [s["name"] for s in listed if s["name"] == name] == [name]
    new_id = ok("create", "--from-snapshot", name).strip()
    try:
        assert api.sh(new_id, "cat /root/c") == "cli\n"
        assert api.get_json(f"/v1/sandboxes/{new_id}")["snapshot"] == name
    finally:
        api.delete_sandbox(new_id)
    cp = cli("fork", sid, "--count", "2", timeout=HIBERNATE_TIMEOUT)
    assert cp.returncode == 0, cp
    kids = cp.stdout.decode().split()
    try:
        assert len(kids) == 2 and b"paused" in cp.stderr
        for k in kids:
            assert api.get_json(f"/v1/sandboxes/{k}")["forked_from"] == sid
    finally:
        for k in kids:
            api.delete_sandbox(k)
    assert ok("snapshot", "delete", name) == ""
    cp = cli("snapshot", "delete", name)
    assert cp.returncode == 1 and b"not found" in cp.stderr, cp
    cp = cli("pause", "nosuchsandbox")
    assert cp.returncode == 1 and b"not found" in cp.stderr, cp
    assert cli("fork", sid, "--count", "0").returncode == 2


@pytest.mark.process_only("kill -9 of the shared isolad; process tier")
def test_restart_keeps_paused_and_hibernated(isolad, api, tier):
    """kill -9 of isolad: a paused sandbox is still paused (its processes frozen, same memory)
    and resumable; a hibernated one is still hibernated and resumes with its files."""
    p = api.create_sandbox()["id"]
    h = api.create_sandbox()["id"]
    try:
        pid = counter_loop(api, p)
        before = read_counter(api, p)
        post(api, p, "pause")
        api.write_file(h, "/root/keep", b"hib\n")
        post(api, h, "hibernate")
        isolad.stop(kill9=True)
        isolad.start()
        c = isolad.client(timeout=HIBERNATE_TIMEOUT)
        assert state(c, p) == "paused"
        assert state(c, h) == "hibernated"
        post(c, p, "resume")
        after = read_counter(c, p)
        assert after >= before
        procs = c.get_json(f"/v1/sandboxes/{p}/processes")["processes"]
        assert any(x["pid"] == pid and x.get("running") for x in procs), procs
        post(c, h, "resume")
        assert c.read_file(h, "/root/keep") == b"hib\n"
        # A clean restart too.
        post(c, h, "hibernate")
        isolad.restart()
        c = isolad.client(timeout=HIBERNATE_TIMEOUT)
        assert state(c, h) == "hibernated"
        post(c, h, "resume")
        assert c.read_file(h, "/root/keep") == b"hib\n"
    finally:
        for s in (p, h):
            isolad.client().delete_sandbox(s)


@pytest.mark.process_only("reconcile rules are tier-independent; the process tier is quick")
def test_reconcile_of_cut_short_operations(isolad, api):
    """Operations cut short at each step, staged on disk and in SQLite while isolad is down
    (the states core writes before acting), come back consistent."""
    import os
    import sqlite3
    c = api
    live = c.create_sandbox()["id"]       # will look like a pause/snapshot cut short
    swap = c.create_sandbox()["id"]       # hibernation image sealed, old one not yet replaced
    wake = c.create_sandbox()["id"]       # a resume from hibernation cut short
    for sid in (live, swap, wake):
        c.write_file(sid, "/root/who", sid.encode())
    post(c, swap, "hibernate")
    post(c, wake, "hibernate")
    isolad.stop()
    hib = os.path.join(isolad.state_dir, "snapshots", "hibernated")
    os.rename(os.path.join(hib, swap), os.path.join(hib, swap + ".new"))
    db = sqlite3.connect(os.path.join(isolad.state_dir, "isola.db"))
    db.execute("UPDATE sandboxes SET state='snapshotting' WHERE id=?", (live,))
    db.execute("UPDATE sandboxes SET state='hibernating' WHERE id=?", (swap,))
    db.execute("UPDATE sandboxes SET state='waking' WHERE id=?", (wake,))
    db.commit()
    db.close()
    isolad.start()
    c = isolad.client(timeout=HIBERNATE_TIMEOUT)
    assert state(c, live) == "running"
    assert state(c, swap) == "hibernated"
    assert state(c, wake) == "hibernated"
    assert sorted(os.listdir(hib)) == sorted([swap, wake])
    for sid in (live, swap, wake):
        post(c, sid, "resume")
        assert c.read_file(sid, "/root/who") == sid.encode()
        c.delete_sandbox(sid)
