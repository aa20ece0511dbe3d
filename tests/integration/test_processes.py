# SPDX-License-Identifier: Apache-2.0
"""Background processes: start, list, output replay and follow, stdin, signals, wait; PTYs over
WebSocket; an output flood with nobody reading keeps isolad's memory bounded."""

import json
import re
import time

import pytest

import isola_client as ic

pytestmark = pytest.mark.tiers("process", "microvm")


def procs(api, sid):
    return ic.item_list(api.get_json(f"/v1/sandboxes/{sid}/processes"), "processes")


def find(api, sid, pid):
    return [p for p in procs(api, sid) if p["pid"] == pid]


def signal(api, sid, pid, sig):
    return api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal",
                       json={"signal": sig})


def output(api, sid, pid, follow=False, timeout=20):
    q = {"follow": "true"} if follow else None
    return api.stream("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output", query=q,
                      kind="ndjson", timeout=timeout)


def test_start_list_get_signal_wait(api, sandbox):
    sid = sandbox["id"]
    p = api.start_process(sid, cmd=["sh", "-c", "echo hi; exec sleep 300"], tag="sleeper")
    pid = p["pid"]
    assert isinstance(pid, int) and pid > 1, p
    listed = find(api, sid, pid)
    assert len(listed) == 1, procs(api, sid)
    assert listed[0]["running"] is True
    assert listed[0]["tag"] == "sleeper"
    one = api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert one["pid"] == pid and one["running"] is True
    # Wait with a short timeout on a running process: 504, and it keeps running.
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/wait", query={"timeout": 1},
                    timeout=20)
    assert r.status == 504, r
    assert r.error_code == "timeout"
    assert api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")["running"] is True
    r = signal(api, sid, pid, "TERM")
    assert r.status == 204, r
    ex = api.wait_process(sid, pid, timeout=20)
    assert ex["signal"] in (15, "TERM", "SIGTERM"), ex
    one = api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")
    assert one["running"] is False
    # Wait on a finished process answers at once, again.
    assert api.wait_process(sid, pid, timeout=5)["signal"] == ex["signal"]


def test_signal_by_number(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sleep", "300"])["pid"]
    assert signal(api, sid, pid, 9).status == 204
    ex = api.wait_process(sid, pid, timeout=20)
    assert ex["signal"] in (9, "KILL", "SIGKILL"), ex


def test_bad_signal(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sleep", "300"])["pid"]
    try:
        for sig in ("NOPE", 0, 99, -1):
            r = signal(api, sid, pid, sig)
            assert r.status == 400, (sig, r)
            assert r.error_code == "invalid"
    finally:
        signal(api, sid, pid, "KILL")


def test_unknown_pid(api, sandbox):
    sid = sandbox["id"]
    for method, suffix in [("GET", ""), ("POST", "/signal"), ("POST", "/wait"),
                           ("GET", "/output")]:
        r = api.request(method, f"/v1/sandboxes/{sid}/processes/99999{suffix}",
                        json={"signal": "TERM"} if suffix == "/signal" else None,
                        query={"timeout": 1} if suffix == "/wait" else None)
        assert r.status == 404, (method, suffix, r)
        assert r.error_code == "not_found"
    r = api.request("GET", f"/v1/sandboxes/{sid}/processes/notanumber")
    assert r.status in (400, 404), r


def test_exit_code_and_output_replay(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sh", "-c", "echo out; echo err >&2; exit 4"])["pid"]
    ex = api.wait_process(sid, pid, timeout=20)
    assert ex["exit_code"] == 4, ex
    with output(api, sid, pid) as s:
        assert s.status == 200, s.body_if_error()
        got = ic.collect(s.read_all(timeout=20))
    assert got["stdout"] == b"out\n" and got["stderr"] == b"err\n", got
    assert got["exit"] and got["exit"]["exit_code"] == 4
    assert not got["dropped"]


def test_output_follow(api, sandbox):
    """Replay what was printed, then follow live output until exit (flush proven without
    timing: the process waits for a file we create after reading its first line)."""
    sid = sandbox["id"]
    script = "echo one; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo two"
    pid = api.start_process(sid, cmd=["sh", "-c", script])["pid"]
    with output(api, sid, pid, follow=True) as s:
        assert s.status == 200, s.body_if_error()
        s.read_output_until(b"one\n", timeout=20)
        api.write_file(sid, "/tmp/go", b"")
        s.read_until(lambda ev: ev.get("type") == "exit", timeout=20)
    assert ic.collect(s.events)["stdout"] == b"one\ntwo\n"


def test_two_followers(api, sandbox):
    sid = sandbox["id"]
    script = "echo one; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo two"
    pid = api.start_process(sid, cmd=["sh", "-c", script])["pid"]
    with output(api, sid, pid, follow=True) as a, output(api, sid, pid, follow=True) as b:
        a.read_output_until(b"one\n")
        b.read_output_until(b"one\n")
        api.write_file(sid, "/tmp/go", b"")
        for s in (a, b):
            s.read_until(lambda ev: ev.get("type") == "exit")
            assert ic.collect(s.events)["stdout"] == b"one\ntwo\n"


def test_stdin_write_and_close(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["cat"])["pid"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/stdin", body=b"hello\n",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    assert r.json()["bytes"] == 6
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/stdin", body=b"\x00\xffbin")
    assert r.status == 200 and r.json()["bytes"] == 5, r
    assert api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")["running"] is True
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/close-stdin")
    assert r.status == 204, r
    ex = api.wait_process(sid, pid, timeout=20)
    assert ex["exit_code"] == 0, ex
    with output(api, sid, pid) as s:
        assert ic.collect(s.read_all())["stdout"] == b"hello\n\x00\xffbin"


def test_stdin_with_close_query(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["wc", "-c"])["pid"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/stdin",
                    body=b"z" * 300000, query={"close": "true"})
    assert r.status == 200 and r.json()["bytes"] == 300000, r
    assert api.wait_process(sid, pid, timeout=20)["exit_code"] == 0
    with output(api, sid, pid) as s:
        assert ic.collect(s.read_all())["stdout"].strip() == b"300000"


def test_process_env_cwd_user_timeout(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sh", "-c", 'echo "$V $(pwd) $(id -u)"'], env={"V": "v1"},
                            cwd="/tmp", user="user")["pid"]
    assert api.wait_process(sid, pid)["exit_code"] == 0
    with output(api, sid, pid) as s:
        assert ic.collect(s.read_all())["stdout"] == b"v1 /tmp 1000\n"
    pid = api.start_process(sid, cmd=["sleep", "300"], timeout=1)["pid"]
    ex = api.wait_process(sid, pid, timeout=20)
    assert ex["timed_out"] is True, ex


def test_process_command_string(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, command="echo $((2+3))")["pid"]
    api.wait_process(sid, pid)
    with output(api, sid, pid) as s:
        assert ic.collect(s.read_all())["stdout"] == b"5\n"


# ---- PTY over WebSocket ----

def ws_path(sid, pid):
    return f"/v1/sandboxes/{sid}/processes/{pid}/ws"


def test_pty_websocket(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sh"], tty=True, cols=80, rows=24,
                            env={"PS1": "$ "})["pid"]
    with ic.WebSocket.connect(api, ws_path(sid, pid)) as ws:
        pty = ic.PtySession(ws)
        ws.send_binary(b"tty; stty size\n")
        m = pty.wait_output(rb"/dev/pts/\d+")
        assert m, pty.output
        pty.wait_output(rb"24 80")
        mark = len(pty.output)
        ws.send_json({"type": "resize", "cols": 100, "rows": 40})
        ws.send_binary(b"stty size\n")
        pty.wait_output(rb"40 100", start=mark)
        # The terminal is a terminal: isatty on all three fds.
        mark = len(pty.output)
        ws.send_binary(b"[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo ALL-TTY\n")
        pty.wait_output(rb"ALL-TTY\r?\n", start=mark)
        ws.send_binary(b"exit 3\n")
        pty.pump_until(lambda s: s.exit is not None)
        assert pty.exit["exit_code"] == 3, pty.exit
    assert api.wait_process(sid, pid, timeout=10)["exit_code"] == 3


def test_pty_resize_route_and_signal_control(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sh"], tty=True, cols=80, rows=24)["pid"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/resize",
                    json={"cols": 120, "rows": 50})
    assert r.status == 204, r
    with ic.WebSocket.connect(api, ws_path(sid, pid)) as ws:
        pty = ic.PtySession(ws)
        ws.send_binary(b"stty size\n")
        pty.wait_output(rb"50 120")
        ws.send_json({"type": "signal", "signal": "KILL"})
        pty.pump_until(lambda s: s.exit is not None)
        assert pty.exit["signal"] in (9, "KILL", "SIGKILL"), pty.exit


def test_ws_close_stdin_control(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sh", "-c", "wc -c"])["pid"]
    with ic.WebSocket.connect(api, ws_path(sid, pid)) as ws:
        pty = ic.PtySession(ws)
        ws.send_binary(b"abcdef")
        ws.send_json({"type": "close_stdin"})
        pty.pump_until(lambda s: s.exit is not None)
        assert pty.output.strip() == b"6", pty.output
        assert pty.exit["exit_code"] == 0


def test_ws_bad_control_message(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sleep", "300"])["pid"]
    try:
        with ic.WebSocket.connect(api, ws_path(sid, pid)) as ws:
            ws.send_text("{not json")
            # The server either ignores it, reports an error text frame, or closes with a
            # protocol/policy code; it must not crash or hang the daemon.
            try:
                op, payload = ws.recv(timeout=3)
                if op == ic.OP_TEXT:
                    assert json.loads(payload).get("type") == "error", payload
            except ic.StreamTimeout:
                pass
        assert api.request("GET", "/v1/health").status == 200
    finally:
        signal(api, sid, pid, "KILL")


def test_ws_on_unknown_pid(api, sandbox):
    with pytest.raises(ic.WebSocketError) as e:
        ic.WebSocket.connect(api, ws_path(sandbox["id"], 99999))
    assert getattr(e.value, "status", None) == 404, e.value


def test_ws_without_upgrade_headers(api, sandbox):
    sid = sandbox["id"]
    pid = api.start_process(sid, cmd=["sleep", "300"])["pid"]
    try:
        r = api.request("GET", ws_path(sid, pid))
        assert r.status in (400, 426), r
    finally:
        signal(api, sid, pid, "KILL")


# ---- flood with a stalled reader ----

def agent_rss_kib(api, sid, tier, init):
    """The agent's VmRSS: from the host (process tier: the sandbox's PID 1), or from the
    guest kernel (microvm: the host sees only QEMU, whose RSS includes guest RAM)."""
    if tier == "process":
        return ic.vmrss_kib(init) or 0
    out = api.sh(sid, "grep VmRSS /proc/1/status")
    return int(out.split()[1])


def test_output_flood_keeps_isolad_bounded(api, isolad, sandbox, tier):
    """200 MB of output with nobody reading: isolad's RSS stays bounded, the sandbox still
    answers other requests, and a late attach is told how much it missed."""
    sid = sandbox["id"]
    base_rss = ic.vmrss_kib(isolad.pid)
    assert base_rss, "cannot read isolad's VmRSS"
    bound = base_rss + 64 * 1024
    pid = api.start_process(sid, cmd=["sh", "-c", "yes | head -c 200000000"], tag="flood")["pid"]
    init = ic.sandbox_init_pid(sid)
    peak, agent_peak = base_rss, 0
    answered = 0
    deadline = time.monotonic() + 120
    while True:
        peak = max(peak, ic.vmrss_kib(isolad.pid) or 0)
        agent_peak = max(agent_peak, agent_rss_kib(api, sid, tier, init))
        t0 = time.monotonic()
        res = api.exec(sid, cmd=["echo", "alive"], timeout=10)
        assert res["stdout"] == "alive\n"
        assert time.monotonic() - t0 < 10, "exec stalled behind the flood"
        answered += 1
        st = api.get_json(f"/v1/sandboxes/{sid}/processes/{pid}")
        if not st["running"]:
            break
        assert time.monotonic() < deadline, "the flood did not finish in 120 s"
        time.sleep(0.2)
    assert peak < bound, f"isolad VmRSS peaked at {peak} KiB (baseline {base_rss} KiB)"
    assert agent_peak < 64 * 1024, f"agent VmRSS peaked at {agent_peak} KiB"
    ex = api.wait_process(sid, pid, timeout=10)
    assert ex["exit_code"] == 0, ex
    with output(api, sid, pid) as s:
        assert s.status == 200
        got = ic.collect(s.read_all(timeout=30))
    assert got["dropped"], f"late attach should report dropped bytes: {got['types'][:5]}"
    dropped = sum(ev.get("bytes", 0) for ev in got["dropped"] if ev.get("stream", "stdout")
                  == "stdout")
    assert dropped > 0
    assert dropped + len(got["stdout"]) == 200000000, (dropped, len(got["stdout"]))
    assert len(got["stdout"]) <= 4 << 20
    assert re.fullmatch(rb"y?(\ny)*\n?", got["stdout"]), got["stdout"][:40]
    assert got["exit"]["exit_code"] == 0
