# SPDX-License-Identifier: Apache-2.0
"""Docker habits of the CLI against the real isolad: run -it, -e/--env-file, --name, ls -q/-a/--filter,
rm -f, prune, wait, top, stats, options after the sandbox id, Ctrl-C on a streamed exec, and
the plain words for OOM, timeouts and ended sandboxes."""

import json
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

from tenancy_util import ROOT_CONFTEST

CLI = ROOT_CONFTEST.CLI
from test_cli import jout, ok, run_in_pty


def test_exec_options_after_the_id(cli, sandbox):
    sid = sandbox["id"]
    assert ok(cli("exec", sid, "-w", "/tmp", "--", "pwd")) == "/tmp\n"
    assert ok(cli("exec", sid, "-e", "A=1", "sh", "-c", "echo $A")) == "1\n"
    # After the command starts, its own flags are left alone.
    assert ok(cli("exec", sid, "sh", "-c", "echo $0", "-w")) == "-w\n"


def test_env_and_env_file(cli, tmp_path):
    f = tmp_path / "env"
    f.write_text("# comment\n\nB=from file\nC=3\n")
    out = ok(cli("run", "-e", "A=1", "--env-file", str(f), "--", "sh", "-c", 'echo "$A|$B|$C"'))
    assert out == "1|from file|3\n"
    f.write_text("GOOD=1\nnot a pair\n")
    cp = cli("run", "--env-file", str(f), "--", "true")
    assert cp.returncode == 2 and re.search(rb"--env-file line 2 `not a pair`", cp.stderr), cp
    cp = cli("run", "--env-file", str(tmp_path / "missing"), "--", "true")
    assert cp.returncode == 2 and b"missing" in cp.stderr, cp


def test_run_it(cli, isolad):
    status, out = run_in_pty([str(CLI), "--socket", isolad.socket, "run", "-it", "--", "sh"],
                             [(rb"[#$] ", b"echo hi-$((6*7))\n"), (rb"hi-42", b"exit 3\n")])
    assert status == 3 and b"hi-42" in out, out


def test_name_ls_filters_rm_f(cli, api):
    name = f"web-{uuid.uuid4().hex[:8]}"
    sid = ok(cli("create", "--name", name, "--label", "habit=1")).strip()
    try:
        assert jout(cli("inspect", name, json=True))["id"] == sid
        assert ok(cli("exec", name, "--", "echo", "by name")) == "by name\n"
        cp = cli("create", "--name", name)
        assert cp.returncode == 1 and name.encode() in cp.stderr, cp
        assert ok(cli("ls", "-q", "--filter", f"name={name}")) == f"{sid}\n"
        assert ok(cli("ls", "--filter", "label=habit=1", "-q")).split() == [sid]
        human = ok(cli("ls", "--filter", f"name={name}"))
        assert re.search(rf"^{sid}\s+{name}\s", human, re.M), human
        cp = cli("ls", "--filter", "colour=red")
        assert cp.returncode == 2 and b"colour=red" in cp.stderr, cp
    finally:
        assert ok(cli("rm", "-f", name)) == f"{name}\n"
    # Ended: gone from ls, listed by ls -a with its reason, and inspect says why.
    assert sid not in ok(cli("ls", "-q"))
    assert re.search(rf"^{sid}\s+{name}.*ended \(destroyed\)", ok(cli("ls", "-a")), re.M)
    cp = cli("inspect", sid)
    assert cp.returncode == 1 and b"destroyed" in cp.stderr and b"not found" not in cp.stderr, cp


def test_expiry_is_said_and_wait_prune(cli):
    sid = ok(cli("create", "--ttl", "2")).strip()
    out = ok(cli("wait", sid, timeout=60))
    assert out == f"{sid} ended (expired)\n", out
    cp = cli("exec", sid, "--", "true")
    assert cp.returncode == 125 and b"expired" in cp.stderr, cp  # exec could not run it
    assert jout(cli("wait", sid, json=True))["end_reason"] == "expired"
    pruned = jout(cli("prune", json=True))
    assert sid in pruned["removed"], pruned
    assert sid not in ok(cli("ls", "-a", "-q"))
    cp = cli("prune", "--state", "running")
    assert cp.returncode == 2 and b"running" in cp.stderr, cp


def test_top_and_stats(cli, sandbox):
    sid = sandbox["id"]
    pid = ok(cli("exec", "-d", sid, "--", "sleep", "300")).strip()
    out = ok(cli("top", sid))
    assert re.match(r"cpu [\d.]+s   mem \S+ / \S+   disk \S+   pids \d+\n\nPID", out), out
    assert re.search(rf"^{pid}\s.*running\s+sleep 300$", out, re.M), out
    out = ok(cli("stats", "--no-stream", sid))
    head, row = out.splitlines()[:2]
    assert head.split()[:3] == ["ID", "CPU", "%"], out
    assert row.startswith(sid) and re.search(r"\d+\.\d\d%", row), out
    sample = json.loads(ok(cli("stats", "--no-stream", sid, json=True)))
    assert sample[0]["id"] == sid and "cpu_percent" in sample[0] and sample[0]["pids"] >= 1
    # Without ids: every running sandbox, this one among them.
    assert sid in ok(cli("stats", "--no-stream"))
    # Global options after the operands, here after kill's SIGNAL.
    assert isinstance(jout(cli("kill", sid, pid, "KILL", "--json")), dict)


def test_stats_streams_until_interrupted(isolad, sandbox):
    p = subprocess.Popen([str(CLI), "--socket", isolad.socket, "stats", "--interval", "1",
                          sandbox["id"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = []
        while sum(ln.startswith(b"ID") for ln in lines) < 2:
            ln = p.stdout.readline()
            assert ln, (lines, p.stderr.read())
            lines.append(ln)
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 0
    finally:
        if p.poll() is None:
            p.kill()


def _exec_then_interrupt(isolad, sid, script, times):
    p = subprocess.Popen([str(CLI), "--socket", isolad.socket, "exec", sid, "--", "sh", "-c",
                          script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"ready\n"
        for _ in range(times):
            p.send_signal(signal.SIGINT)
            time.sleep(0.5)  # lets the first signal land before the second; not an assertion
        status = p.wait(60)
        return status, p.stdout.read(), p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()


def test_ctrl_c_reaches_the_process(isolad, cli, sandbox):
    sid = sandbox["id"]
    status, out, err = _exec_then_interrupt(
        isolad, sid, 'trap "echo got INT; exit 3" INT; echo ready; while :; do sleep 0.2; done', 1)
    assert status == 3 and out == b"got INT\n", (status, out, err)
    # A process that ignores SIGINT: the second Ctrl-C kills it.
    status, out, err = _exec_then_interrupt(
        isolad, sid, 'trap "" INT; echo ready; exec sleep 300', 2)
    assert status == 137, (status, out, err)
    procs = jout(cli("ps", sid, json=True))
    assert not [p for p in procs if p.get("running")], procs


def test_oom_and_timeout_words(cli):
    cp = cli("run", "--memory", "64M", "--", "python3", "-c", "x = bytearray(300 << 20)",
             timeout=120)
    assert cp.returncode == 137, cp
    assert b"killed: out of memory (limit 64M)" in cp.stderr, cp
    cp = cli("run", "--timeout", "1", "--", "sleep", "30")
    assert cp.returncode == 124 and b"timed out after 1s" in cp.stderr, cp


def test_ps_says_out_of_memory(cli):
    sid = ok(cli("create", "--memory", "64M")).strip()
    try:
        cp = cli("exec", sid, "--", "python3", "-c", "x = bytearray(300 << 20)", timeout=120)
        assert cp.returncode == 137, cp
        out = ok(cli("ps", sid))
        assert "out of memory" in out and "killed (KILL)" not in out, out
    finally:
        cli("rm", sid)


def test_human_sizes_and_times(cli, sandbox):
    sid = sandbox["id"]
    out = ok(cli("inspect", sid))
    assert re.search(r"^created_at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(.*\)$", out, re.M), out
    assert re.search(r"^memory: \d+(\.\d)?[KMGT]$", out, re.M), out
    assert "e+09" not in out, out
    ok(cli("exec", sid, "--", "sh", "-c", "head -c 3000 /dev/zero > /tmp/f3k"))
    out = ok(cli("fs", "ls", "-l", sid, "/tmp"))
    assert re.search(r"^-rw\S+\s+2\.9K\s.*f3k$", out, re.M), out
    tl = ok(cli("template", "ls")).splitlines()
    assert tl[0].split()[:2] == ["NAME", "SIZE"]
    assert all(re.match(r"\S+\s+\d+(\.\d)?[BKMGTP]\s", ln) for ln in tl[1:]), tl
    cp = cli("run", "--memory", "1T", "--", "true")
    assert cp.returncode == 125 and b"1.0T requested" in cp.stderr, cp
    assert not re.search(rb"\d{7,}", cp.stderr), cp


def test_colour_only_on_a_terminal(isolad, cli):
    argv = [str(CLI), "--socket", isolad.socket, "inspect", "nosuchsandbox0000"]
    env = dict(os.environ, TERM="xterm")
    env.pop("NO_COLOR", None)
    _, out = run_in_pty(argv, env=env)
    assert b"\x1b[1;31misola:\x1b[0m" in out, out
    _, out = run_in_pty(argv, env=dict(env, NO_COLOR="1"))
    assert b"\x1b[" not in out and b"isola: " in out, out
    cp = cli("inspect", "nosuchsandbox0000", env={"TERM": "xterm"})
    assert b"\x1b[" not in cp.stderr, cp
    _, out = run_in_pty([str(CLI), "--socket", isolad.socket, "ls"], env=env)
    assert out.startswith(b"\x1b[1mID"), out
