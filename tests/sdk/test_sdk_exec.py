# SPDX-License-Identifier: Apache-2.0
"""Python SDK: exec (whole and streamed), background processes, PTY over WebSocket."""

import time

import pytest

import isola


def test_exec_shell_and_argv(sb):
    r = sb.exec("echo out; echo err >&2; exit 3", timeout=20)
    assert (r.stdout, r.stderr, r.exit_code, r.ok) == ("out\n", "err\n", 3, False)
    assert r.stdout_bytes == 4 and not r.stdout_truncated and r.signal == 0
    r = sb.exec(["printf", "%s|", "a b", "c"], timeout=20)
    assert r.stdout == "a b|c|" and r.ok


def test_exec_env_cwd_stdin(sb):
    r = sb.exec("echo $A-$B; pwd; cat", env={"A": "1", "B": "two"}, cwd="/tmp",
                stdin="from stdin", timeout=20)
    assert r.stdout == "1-two\n/tmp\nfrom stdin", r


def test_exec_timeout_and_signal(sb):
    r = sb.exec(["sleep", "30"], timeout=1)
    assert r.timed_out and not r.ok and r.duration_ms < 20000
    r = sb.exec("kill -9 $$", timeout=20)
    assert r.signal == 9 and r.exit_code == 137


def test_exec_oom_killed_child(client):
    """A shell survives its child's OOM kill and exits 0: oom_killed is still True (from the
    sandbox's OOM-kill counter, not the exit status)."""
    s = client.create_sandbox(memory="256M", labels={"suite": "sdk"})
    try:
        r = s.exec("python3 -c 'x = bytearray(600 << 20)'; echo rc=$?", timeout=120)
        assert r.exit_code == 0 and "rc=137" in r.stdout, r
        assert r.oom_killed is True, r
        assert s.exec("true", timeout=20).oom_killed is False
    finally:
        s.delete()


def test_exec_binary_output_and_truncation(sb):
    r = sb.exec(["printf", r"\377\376ok"], timeout=20)
    assert r.stdout_raw == b"\xff\xfeok"
    r = sb.exec("head -c 5000 /dev/zero", max_output=100, timeout=20)
    assert r.stdout_truncated and r.stdout_bytes == 5000 and len(r.stdout) == 100


def test_exec_errors(sb):
    with pytest.raises(isola.NotFoundError):
        sb.exec(["/no/such/program"], timeout=20)
    with pytest.raises(isola.NotFoundError) as ei:
        sb.exec("true", cwd="/no/such/dir", timeout=20)
    assert "/no/such/dir" in ei.value.message
    with pytest.raises(ValueError):
        sb.exec([])


def test_exec_stream_iterator(sb):
    with sb.exec_stream("echo one; sleep 0.2; echo two >&2; echo three; exit 4",
                        timeout=20) as s:
        events = list(s)
        assert events[0].type == "start" and s.pid == events[0].pid > 0
        assert events[-1].type == "exit" and events[-1].exit.exit_code == 4
        res = s.result()
    assert res.stdout == "one\nthree\n" and res.stderr == "two\n" and res.exit_code == 4
    types = [e.type for e in events]
    assert types.index("stderr") > types.index("stdout")


def test_exec_callbacks_arrive_live(sb):
    seen = []
    t0 = time.monotonic()
    res = sb.exec("echo first; sleep 1; echo second; echo e >&2", timeout=20,
                  on_stdout=lambda b: seen.append((time.monotonic() - t0, b)),
                  on_stderr=lambda b: seen.append((time.monotonic() - t0, b"ERR:" + b)))
    assert res.exit_code == 0 and res.stdout == "first\nsecond\n" and res.stderr == "e\n"
    data = b"".join(b for _, b in seen)
    assert b"first" in data and b"second" in data and b"ERR:e\n" in data
    first_t = next(t for t, b in seen if b"first" in b)
    second_t = next(t for t, b in seen if b"second" in b)
    assert second_t - first_t >= 0.5, seen  # streamed, not delivered at the end


def test_background_process_lifecycle(sb):
    p = sb.processes.start(["cat"], tag="echoer")
    assert p.pid > 0 and p.running and p.tag == "echoer" and not p.tty
    assert p.pid in [x.pid for x in sb.processes.list()]
    assert sb.processes.get(p.pid).running
    assert sb.processes.write_stdin(p.pid, b"hello ") == 6
    assert sb.processes.write_stdin(p.pid, iter([b"wor", b"ld\n"]), close=True) == 6
    ex = sb.processes.wait(p.pid, timeout=20)
    assert ex.exit_code == 0 and ex.ok
    out = sb.processes.output(p.pid)
    assert out.stdout == b"hello world\n" and out.exit and out.exit.exit_code == 0
    got = sb.processes.get(p.pid)
    assert not got.running and got.exit_code == 0


def test_process_close_stdin_signal_wait_timeout(sb):
    p = sb.processes.start("cat; echo done", timeout=60)
    sb.processes.close_stdin(p.pid)
    assert sb.processes.wait(p.pid, timeout=20).exit_code == 0
    p = sb.processes.start(["sleep", "60"])
    with pytest.raises(isola.TimeoutError) as ei:
        sb.processes.wait(p.pid, timeout=0.3)
    assert ei.value.status == 504
    sb.processes.signal(p.pid, "KILL")
    ex = sb.processes.wait(p.pid, timeout=20)
    assert ex.signal == 9 and ex.exit_code == 137
    with pytest.raises(isola.NotFoundError):
        sb.processes.get(999999)
    with pytest.raises(isola.InvalidError):
        sb.processes.signal(p.pid, "NOSUCHSIG")


def test_process_output_follow_stream(sb):
    p = sb.processes.start("for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 7")
    with sb.processes.stream(p.pid, follow=True, timeout=20) as s:
        res = s.result()
    assert res.stdout == "line1\nline2\nline3\n" and res.exit_code == 7
    with sb.processes.stream(p.pid, follow=False, timeout=20) as s:
        assert b"line3" in b"".join(e.data for e in s if e.type == "stdout")


def test_pty_over_websocket(sb):
    with sb.pty("/bin/sh", cols=100, rows=30) as pty:
        pty.send("stty size\n")
        pty.read_until(rb"30 100", timeout=20)
        pid = [p for p in sb.processes.list() if p.tty and p.running][0].pid
        sb.processes.resize(pid, 120, 40)
        mark = len(pty.output)
        pty.send("stty size\n")
        pty.read_until(rb"40 120", timeout=20, start=mark)
        pty.resize(90, 20)
        mark = len(pty.output)
        pty.send("stty size\n")
        pty.read_until(rb"20 90", timeout=20, start=mark)
        pty.send("exit 3\n")
        ex = pty.wait(timeout=20)
    assert ex.exit_code == 3


def test_attach_to_plain_process(sb):
    p = sb.processes.start("read x; echo got:$x")
    with sb.attach(p.pid) as s:
        s.send(b"abc\n")
        s.read_until(rb"got:abc", timeout=20)
        assert s.wait(timeout=20).exit_code == 0
    with pytest.raises(isola.NotFoundError):
        sb.attach(999999)
