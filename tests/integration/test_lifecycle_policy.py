# SPDX-License-Identifier: Apache-2.0
"""Timeout policy (on_timeout kill|pause|hibernate), idle detection and auto-resume
(docs/persistence.md "Timeouts and idle"). Outcomes are judged on the host: the sandbox's
cgroup freezer, its processes, the files it keeps — not only the API's word."""

import glob
import os
import time

import pytest

import isola_client as ic

# Generous: the monitor samples once a second and the test machine is shared.
SETTLE = 40


def freezer_state(sid):
    """'FROZEN'/'THAWED' from the sandbox's cgroup freezer (v1 freezer.state or v2
    cgroup.events), or None when it has no cgroup."""
    for p in glob.glob(f"/sys/fs/cgroup/freezer/isola/{sid}/freezer.state"):
        return open(p).read().strip()
    for p in glob.glob(f"/sys/fs/cgroup/isola/{sid}/cgroup.events"):
        for line in open(p):
            if line.startswith("frozen "):
                return "FROZEN" if line.split()[1] == "1" else "THAWED"
    return None


def state(api, sid):
    r = api.request("GET", f"/v1/sandboxes/{sid}")
    return r.json()["state"] if r.status == 200 else r.status


def wait_state(api, sid, want, timeout=SETTLE):
    return ic.wait_for(lambda: state(api, sid) == want, timeout, interval=0.25,
                       what=f"sandbox {sid} to be {want} (is {state(api, sid)})")


def start_counter(api, sid):
    """A background process counting in memory, writing its count to /tmp/count (through a
    rename, so a reader never sees the file truncated and not yet written)."""
    p = api.start_process(sid, cmd=["sh", "-c",
                                    "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; "
                                    "mv /tmp/count.new /tmp/count; sleep 0.2; done"])
    return p["pid"]


def read_count(api, sid):
    return int(api.sh(sid, "cat /tmp/count").strip())


def test_unknown_policy_is_invalid(api):
    r = api.request("POST", "/v1/sandboxes", json={"on_timeout": "freeze"})
    assert r.status == 400 and r.error_code == "invalid", r
    assert "freeze" in r.error_message, r
    r = api.request("POST", "/v1/sandboxes", json={"auto_resume": "yes"})
    assert r.status == 400, r


def test_policy_fields_reported_and_default_kill(make_sandbox):
    sb = make_sandbox()
    assert sb["on_timeout"] == "kill"
    assert sb["idle_timeout"] is None and sb["auto_resume"] is None
    assert sb["idle_since"] is None and isinstance(sb["last_active"], float)
    sb = make_sandbox(on_timeout="pause", idle_timeout=600, auto_resume=True)
    assert (sb["on_timeout"], sb["idle_timeout"], sb["auto_resume"]) == ("pause", 600, True)


def test_ttl_kill_is_the_default(api, make_sandbox):
    sb = make_sandbox(ttl=2)
    sid = sb["id"]
    assert ic.sandbox_host_pids(sid)
    ic.wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}").status == 410, SETTLE,
                what="TTL kill")
    ic.wait_for(lambda: not ic.sandbox_host_pids(sid), 10, what="processes gone")


def test_ttl_pause_freezes_and_a_request_resumes(api, make_sandbox):
    sb = make_sandbox(ttl=3, on_timeout="pause")
    sid = sb["id"]
    api.write_file(sid, "/tmp/keep.txt", b"kept across pause\n")
    pid = start_counter(api, sid)
    wait_state(api, sid, "paused")
    assert freezer_state(sid) == "FROZEN"
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["paused_by"] == "policy" and got["expires_at"] is None, got
    # Frozen: the counter does not move while paused (read on the host through the agent's
    # root, not via the agent, which is frozen too).
    count_file = f"/proc/{ic.sandbox_init_pid(sid)}/root/tmp/count"
    c1 = open(count_file).read()
    time.sleep(1)
    assert open(count_file).read() == c1, "the counter moved while paused"

    # Any agent request resumes a sandbox paused by policy (auto_resume default).
    n1 = read_count(api, sid)
    assert freezer_state(sid) == "THAWED"
    assert api.read_file(sid, "/tmp/keep.txt") == b"kept across pause\n"
    time.sleep(1)
    n2 = read_count(api, sid)
    assert n2 > n1, "the background process did not continue after the resume"
    procs = api.get_json(f"/v1/sandboxes/{sid}/processes")
    assert any(p["pid"] == pid and p.get("running") for p in ic.item_list(procs, "processes"))
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["state"] == "running" and got["paused_by"] is None
    # The TTL restarts on resume (and fires again).
    ic.wait_for(lambda: api.get_json(f"/v1/sandboxes/{sid}")["expires_at"], 5,
                what="TTL restarted")
    wait_state(api, sid, "paused")


def test_ttl_hibernate_releases_processes_and_resumes_with_files(api, make_sandbox):
    sb = make_sandbox(ttl=2, on_timeout="hibernate")
    sid = sb["id"]
    api.write_file(sid, "/home/data.txt", b"hibernated file\n")
    wait_state(api, sid, "hibernated", timeout=60)
    # Scale to zero: nothing of the sandbox runs on the host.
    assert not ic.sandbox_host_pids(sid)
    assert api.get_json(f"/v1/sandboxes/{sid}")["paused_by"] == "policy"
    out = api.exec(sid, cmd=["cat", "/home/data.txt"], http_timeout=120)
    assert out["stdout"] == "hibernated file\n", out
    assert ic.sandbox_host_pids(sid)
    assert state(api, sid) == "running"


def test_user_pause_stays_paused_unless_auto_resume(api, make_sandbox):
    sb = make_sandbox()
    sid = sb["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/pause")
    assert r.status in (200, 204), r
    assert freezer_state(sid) == "FROZEN"
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["true"]})
    assert r.status == 409 and "paused" in r.error_message, r
    assert freezer_state(sid) == "FROZEN"
    assert api.get_json(f"/v1/sandboxes/{sid}")["paused_by"] == "user"
    # Opting in: the same request now resumes it.
    r = api.request("PUT", f"/v1/sandboxes/{sid}/lifecycle", json={"auto_resume": True})
    assert r.status == 200 and r.json()["auto_resume"] is True, r
    assert api.sh(sid, "echo ok") == "ok\n"
    assert freezer_state(sid) == "THAWED"
    # null restores the default rule.
    r = api.request("PUT", f"/v1/sandboxes/{sid}/lifecycle", json={"auto_resume": None})
    assert r.status == 200 and r.json()["auto_resume"] is None, r


def test_lifecycle_put_validates_and_persists(api, isolad, make_sandbox):
    sid = make_sandbox()["id"]
    for body in ({"on_timeout": "nap"}, {"idle_timeout": -1}, {"auto_resume": 3},
                 {"colour": "red"}):
        r = api.request("PUT", f"/v1/sandboxes/{sid}/lifecycle", json=body)
        assert r.status == 400 and r.error_code == "invalid", (body, r)
    r = api.request("PUT", f"/v1/sandboxes/{sid}/lifecycle",
                    json={"on_timeout": "hibernate", "idle_timeout": 3600})
    assert r.status == 200, r
    assert (r.json()["on_timeout"], r.json()["idle_timeout"]) == ("hibernate", 3600)
    r = api.request("PUT", "/v1/sandboxes/nosuchsandbox/lifecycle", json={"idle_timeout": 5})
    assert r.status == 404, r
    # Kept in the store: the policy survives an isolad restart.
    isolad.restart()
    got = isolad.client().get_json(f"/v1/sandboxes/{sid}")
    assert (got["on_timeout"], got["idle_timeout"]) == ("hibernate", 3600), got


def test_idle_quiet_sandbox_is_paused(api, make_sandbox):
    sid = make_sandbox(idle_timeout=2, on_timeout="pause")["id"]
    t0 = time.monotonic()
    wait_state(api, sid, "paused")
    assert time.monotonic() - t0 >= 1.5
    assert freezer_state(sid) == "FROZEN"
    got = api.get_json(f"/v1/sandboxes/{sid}")
    assert got["paused_by"] == "policy" and got["idle_since"] is not None, got


def test_idle_quiet_sandbox_is_hibernated(api, make_sandbox):
    sb = make_sandbox(idle_timeout=2, on_timeout="hibernate")
    sid = sb["id"]
    api.write_file(sid, "/home/idle.txt", b"idle\n")
    wait_state(api, sid, "hibernated", timeout=60)
    assert not ic.sandbox_host_pids(sid)
    assert api.read_file(sid, "/home/idle.txt") == b"idle\n"  # auto-resume on a file read
    assert ic.sandbox_host_pids(sid)


def test_idle_quiet_sandbox_is_killed_by_default(api, make_sandbox):
    sid = make_sandbox(idle_timeout=2)["id"]
    ic.wait_for(lambda: api.request("GET", f"/v1/sandboxes/{sid}").status == 410, SETTLE,
                what="idle kill")
    ic.wait_for(lambda: not ic.sandbox_host_pids(sid), 10, what="processes gone")


def test_idle_cpu_loop_is_not_idle(api, make_sandbox):
    """A sandbox busy on its own (a CPU loop started in the background, no API traffic at
    all) outlives its idle timeout several times; once the work stops it goes idle."""
    sid = make_sandbox(idle_timeout=2, on_timeout="pause")["id"]
    p = api.start_process(sid, cmd=["sh", "-c", "while :; do :; done"])
    # No API calls: watch from the host only.
    time.sleep(8)
    assert freezer_state(sid) == "THAWED"
    assert state(api, sid) == "running"
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{p['pid']}/signal",
                    json={"signal": "KILL"})
    assert r.status in (200, 204), r
    wait_state(api, sid, "paused")


def test_idle_sleeping_process_is_not_idle(api, make_sandbox):
    """No CPU, no stream, no API: a running user process alone keeps it (a build waiting on
    the network is still work)."""
    sid = make_sandbox(idle_timeout=2, on_timeout="pause")["id"]
    api.start_process(sid, cmd=["sleep", "30"])
    time.sleep(7)
    assert freezer_state(sid) == "THAWED"
    assert state(api, sid) == "running"


def test_idle_attached_stream_is_not_idle(isolad, api, make_sandbox):
    """An exec whose output a client is reading keeps the sandbox busy even though the
    command is quiet; once it ends the sandbox goes idle."""
    sid = make_sandbox(idle_timeout=2, on_timeout="pause")["id"]
    c = isolad.client(timeout=60)
    with c.stream("POST", f"/v1/sandboxes/{sid}/exec",
                  json={"cmd": ["sh", "-c", "echo start; sleep 7; echo end"]},
                  query={"stream": "ndjson"}, timeout=60) as st:
        st.read_output_until(b"start", timeout=20)
        assert freezer_state(sid) == "THAWED"
        st.read_output_until(b"end", timeout=30)  # not frozen in between
    assert state(api, sid) in ("running", "paused")
    wait_state(api, sid, "paused")


def test_exposed_port_traffic_resumes_a_paused_sandbox():
    """Traffic to an exposed port goes through the same agent path as exec: a sandbox
    paused by policy wakes for it and the inside server answers."""
    from expose_util import HELLO, Exposer, body_of, start_servers, status_of
    xd = Exposer()
    try:
        sid = xd.api.create_sandbox(on_timeout="pause")["id"]
        start_servers(xd.api, sid)
        token = xd.expose(sid, 8000)["token"]
        r = xd.api.request("POST", f"/v1/sandboxes/{sid}/timeout", json={"ttl": 1})
        assert r.status == 200, r
        wait_state(xd.api, sid, "paused")
        assert freezer_state(sid) == "FROZEN"
        r = xd.get(sid, 8000, "/hello.txt", token)
        assert status_of(r) == 200 and body_of(r) == HELLO, r
        assert freezer_state(sid) == "THAWED"
        assert state(xd.api, sid) == "running"
    finally:
        problems = xd.close()
        assert not problems, problems
