# SPDX-License-Identifier: Apache-2.0
"""Lifecycle: TTL expiry and extension, isolad restarts (SIGTERM and kill -9) re-attach,
sandboxes lost while isolad was down are reported (never silently gone), and destroy leaves
nothing behind on the host (processes, mounts, cgroups, state files)."""

import os
import signal
import time

import pytest

import isola_client as ic

pytestmark = pytest.mark.tiers("process", "microvm")


def state_entry(isolad, sid):
    return os.path.join(isolad.state_dir, "sandboxes", sid)


def host_footprint(isolad, sid, tier):
    """What a sandbox holds on the host, judged from procfs/cgroupfs/mountinfo. Process tier:
    the agent (PID 1) in its own user namespace. microvm: QEMU (PID 1 of its pid namespace),
    as the sandbox's uid and in the host's user namespace (which is therefore not tracked)."""
    init = ic.sandbox_init_pid(sid)
    if tier == "microvm":
        lo = ic.host_uid(init)
        assert lo >= 65536, f"QEMU runs as host uid {lo}"
        return {"uid_range": (lo, lo + 65536), "init": init, "pidns": ic.ns_inode(init, "pid"),
                "userns": None}
    m = ic.uid_map(init)
    assert m and m[0][0] == 0, m
    lo, hi = m[0][1], m[0][1] + m[0][2]
    assert lo >= 65536, f"sandbox root is host uid {lo}"
    return {"uid_range": (lo, hi), "init": init, "pidns": ic.ns_inode(init, "pid"),
            "userns": ic.ns_inode(init, "user")}


def assert_nothing_left(isolad, sid, fp, mounts_before, timeout=10):
    def left():
        return ic.sandbox_leftovers(sid, fp["uid_range"], fp["pidns"], fp["userns"])

    def clean():
        return (not left()
                and not ic.cgroup_dirs(sid) and not os.path.exists(state_entry(isolad, sid))
                and len(ic.mounts_referencing(isolad.state_dir)) <= mounts_before)
    try:
        ic.wait_for(clean, timeout, what="the sandbox's host resources to be released")
    except AssertionError:
        raise AssertionError(
            f"left behind after destroy of {sid}: "
            f"processes: {[(p, (ic.proc_status(p) or {}).get('Name')) for p in left()]}; "
            f"cgroups: {ic.cgroup_dirs(sid)}; "
            f"state entry exists: {os.path.exists(state_entry(isolad, sid))}; mounts: "
            f"{ic.mounts_referencing(isolad.state_dir)[mounts_before:]}") from None


def test_ttl_expiry_destroys(api, isolad, make_sandbox, tier):
    ttl = 2 if tier == "process" else 8  # longer than a TCG boot
    sb = make_sandbox(ttl=ttl)
    t1 = time.time()
    sid = sb["id"]
    assert sb["expires_at"] is not None
    # the TTL counts from when the sandbox ran (test_ttl_counts_from_running), which a
    # loaded host's TCG boot puts well after created_at
    assert ttl - 1 <= sb["expires_at"] - sb["created_at"] and sb["expires_at"] <= t1 + ttl, sb
    fp = host_footprint(isolad, sid, tier)
    ic.wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}").status == 410, ttl + 13,
                interval=0.25, what=f"the sandbox to expire (ttl={ttl})")
    assert sid not in [s["id"] for s in api.list_sandboxes()]
    assert_nothing_left(isolad, sid, fp, 10**9)


def test_ttl_extension(api, make_sandbox):
    sb = make_sandbox(ttl=3)
    sid = sb["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/timeout", json={"ttl": 120})
    assert r.status in (200, 204), r
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["expires_at"] >= time.time() + 100, got
    if r.status == 200:
        assert abs(r.json()["expires_at"] - got["expires_at"]) < 1
    time.sleep(4.5)  # past the original TTL
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["state"] == "running"
    assert api.exec(sid, cmd=["echo", "still"])["stdout"] == "still\n"


def test_ttl_counts_from_running(api, make_sandbox, tier):
    """A TTL shorter than the create (a microvm boots in seconds under TCG) still leaves the
    sandbox its whole TTL once it runs: it used to expire at once, before the create answered."""
    t0 = time.time()
    sb = make_sandbox(ttl=2)
    t1 = time.time()
    assert sb["expires_at"] >= t1 + 1, (sb, t0, t1)  # ~2 s from when it ran, not from t0
    got = api.get_json(f"/v1/sandboxes/{sb['id']}")
    assert got["state"] == "running", got
    ic.wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sb['id']}").status == 410, 30,
                interval=0.25, what="the TTL to fire after the sandbox ran")


def test_ttl_bad_values(api, sandbox):
    sid = sandbox["id"]
    for body in ({"ttl": -1}, {"ttl": "soon"}, {}):
        r = api.request("POST", f"/v1/sandboxes/{sid}/timeout", json=body)
        assert r.status == 400, (body, r)
        assert "ttl" in r.error_message


def test_restart_reattaches(api, isolad, make_sandbox):
    """SIGTERM and then kill -9: sandboxes keep running across both, exec works after, and a
    background process started before is still running (same pid) with its output."""
    sb = make_sandbox(labels={"restart": "yes"})
    sid = sb["id"]
    api.write_file(sid, "/tmp/kept", b"before restart")
    pid = api.start_process(sid, cmd=["sh", "-c", "echo started; exec sleep 600"],
                            tag="survivor")["pid"]
    init = ic.sandbox_init_pid(sid)
    for kill9 in (False, True):
        isolad.restart(kill9=kill9)
        api = isolad.client()
        got = api.get_json(f"/v1/sandboxes/{sid}")
        assert got["state"] == "running", (kill9, got)
        assert got["labels"] == {"restart": "yes"}
        assert ic.sandbox_init_pid(sid) == init, "the sandbox was recreated, not re-attached"
        assert api.exec(sid, cmd=["echo", "after"])["stdout"] == "after\n"
        assert api.read_file(sid, "/tmp/kept") == b"before restart"
        p = api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")
        assert p["running"] is True and p.get("tag", "survivor") == "survivor", p
        with api.stream("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output",
                        kind="ndjson") as s:
            s.read_output_until(b"started\n", timeout=20)
    assert api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal",
                       json={"signal": "KILL"}).status == 204
    assert api.wait_process(sid, pid)["signal"] in (9, "KILL", "SIGKILL")


def test_ttl_survives_restart(api, isolad, make_sandbox, tier):
    sb = make_sandbox(ttl=4 if tier == "process" else 10)
    sid = sb["id"]
    isolad.restart(kill9=True)
    api = isolad.client()
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["state"] == "running", got
    assert abs(got["expires_at"] - sb["expires_at"]) < 1, (got, sb)
    ic.wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}").status == 410, 20,
                interval=0.25, what="the TTL set before the restart to fire after it")


def test_sandbox_lost_while_isolad_down(api, isolad, make_sandbox, tier):
    sb = make_sandbox()
    sid = sb["id"]
    fp = host_footprint(isolad, sid, tier)
    mounts_before = len(ic.mounts_referencing(isolad.state_dir))
    isolad.stop(kill9=True)
    try:
        os.kill(fp["init"], signal.SIGKILL)
        ic.wait_for(lambda: not ic.sandbox_host_pids(sid), 10,
                    what="the sandbox's processes to die with its PID 1")
    finally:
        isolad.start()
    api = isolad.client()
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["state"] == "error", got
    assert "lost" in (got.get("error") or ""), got
    assert sid in [s["id"] for s in api.list_sandboxes()], "errored sandbox must stay listed"
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]})
    assert r.status == 409, r
    assert r.error_code == "conflict" and "error" in r.error_message
    r = api.delete_sandbox(sid)
    assert r.status == 204, r
    assert api.request("GET", f"/v1/sandboxes/{sid}").status == 410
    assert_nothing_left(isolad, sid, fp, mounts_before)


@pytest.mark.host_exclusive  # every isola cgroup on the host
def test_destroy_leaves_nothing(api, isolad, make_sandbox, tier):
    mounts_before = len(ic.mounts_referencing(isolad.state_dir))
    cgroups_before = ic.cgroup_dirs()
    sb = make_sandbox(memory="128M")
    sid = sb["id"]
    try:
        fp = host_footprint(isolad, sid, tier)
        assert ic.cgroup_dirs(sid), "the sandbox has no isola/<id> cgroup on the host"
        assert os.path.isdir(state_entry(isolad, sid))
        # Background work, an orphan that re-parents to the sandbox's PID 1, a setsid daemon,
        # a process as `user`, and a process whose pipe the API is holding.
        api.start_process(sid, cmd=["sleep", "600"])
        api.start_process(sid, command="(sleep 601 &) ; (setsid sleep 602 &) ; sleep 603")
        # (as `user` where the sandbox lets it start; test_exec covers that it must)
        api.request("POST", f"/v1/sandboxes/{sid}/processes",
                    json={"cmd": ["sleep", "604"], "user": "user", "cwd": "/tmp"})
        api.start_process(sid, cmd=["sh", "-c", "yes"])
        if tier == "process":
            ic.wait_for(lambda: len(ic.sandbox_host_pids(sid)) >= 6, 10,
                        what="the sandbox's processes to appear on the host")
        else:  # they live in the guest kernel; the host holds QEMU
            ic.wait_for(lambda: int(api.sh(sid, "pgrep -c 'sleep|yes' || true")) >= 5, 20,
                        what="the sandbox's processes to appear in the guest")
    finally:
        r = api.delete_sandbox(sid)
    assert r.status == 204, r
    assert_nothing_left(isolad, sid, fp, mounts_before)
    # Other isolads on a shared host may come and go: nothing may be new, ours included.
    assert not set(ic.cgroup_dirs()) - set(cgroups_before)


def test_destroy_while_exec_streams(api, isolad, make_sandbox):
    """Destroying a sandbox ends an in-flight streaming exec cleanly (an exit or error event,
    or the stream ends) instead of hanging the client."""
    sb = make_sandbox()
    sid = sb["id"]
    s = api.stream("POST", f"/v1/sandboxes/{sid}/exec",
                   json={"cmd": ["sh", "-c", "echo up; sleep 600"]}, kind="ndjson", timeout=30)
    try:
        assert s.status == 200
        s.read_output_until(b"up\n")
        r = api.delete_sandbox(sid)
        assert r.status == 204, r
        s.read_all(timeout=20)
        assert ic.collect(s.events)["types"][-1] in ("exit", "error", "stdout")
    finally:
        s.close()
    assert api.request("GET", "/v1/health").status == 200


@pytest.mark.host_exclusive  # every isola cgroup on the host
def test_many_sandboxes_create_destroy(api, isolad, make_sandbox, tier):
    """A burst of creates and destroys leaves the daemon consistent and the host clean."""
    cgroups_before = ic.cgroup_dirs()
    n = 6 if tier == "process" else 3  # each TCG boot costs ~3 s of both cores
    made = [make_sandbox(labels={"burst": "1"})["id"] for _ in range(n)]
    assert sorted(s["id"] for s in api.list_sandboxes({"label": "burst=1"})) == sorted(made)
    for sid in made:
        assert api.exec(sid, cmd=["hostname"])["exit_code"] == 0
    for sid in made:
        assert api.delete_sandbox(sid).status == 204
    assert api.list_sandboxes({"label": "burst=1"}) == []
    ic.wait_for(lambda: not set(ic.cgroup_dirs()) - set(cgroups_before), 10,
                what="cgroups to be removed")
