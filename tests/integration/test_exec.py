# SPDX-License-Identifier: Apache-2.0
"""POST /v1/sandboxes/{id}/exec: JSON results, streams (NDJSON, SSE), limits."""

import threading
import time

import pytest

import isola_client as ic

pytestmark = pytest.mark.tiers("process", "microvm")


def test_python_prints_42(api, sandbox):
    res = api.exec(sandbox["id"], cmd=["python3", "-c", "print(6*7)"])
    assert res["exit_code"] == 0, res
    assert res["stdout"] == "42\n"
    assert res["stderr"] == ""
    assert res["timed_out"] is False
    assert res["oom_killed"] is False
    assert res["signal"] in (None, 0)
    assert isinstance(res["duration_ms"], (int, float)) and res["duration_ms"] >= 0
    assert res["stdout_truncated"] is False and res["stderr_truncated"] is False
    assert res["stdout_bytes"] == 3 and res["stderr_bytes"] == 0


def test_command_string_form(api, sandbox):
    res = api.exec(sandbox["id"], command="echo $((6*7)) | tr 4 x")
    assert res["exit_code"] == 0, res
    assert res["stdout"] == "x2\n"


@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_exit_codes(api, sandbox, code):
    res = api.exec(sandbox["id"], cmd=["sh", "-c", f"exit {code}"])
    assert res["exit_code"] == code, res


def test_killed_by_signal(api, sandbox):
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "kill -9 $$"])
    assert res["signal"] in (9, "KILL", "SIGKILL"), res
    assert res["exit_code"] in (None, 137, -1), res


def test_stderr_is_separate(api, sandbox):
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res["exit_code"], res["stdout"], res["stderr"]) == (3, "out\n", "err\n"), res
    assert res["stderr_bytes"] == 4


def test_command_not_found(api, sandbox):
    r = api.request("POST", f"/v1/sandboxes/{sandbox['id']}/exec",
                    json={"cmd": ["/no/such/binary"]})
    # Either a clean API error or an exit code 127 with a message: never a 5xx or a hang.
    if r.status == 200:
        assert r.json()["exit_code"] == 127, r
    else:
        assert r.status in (400, 404), r
        assert "/no/such/binary" in r.error_message


def test_env(api, make_sandbox):
    sb = make_sandbox(env={"SB_VAR": "from-sandbox", "BOTH": "sandbox"})
    res = api.exec(sb["id"], cmd=["sh", "-c", 'echo "$SB_VAR $REQ_VAR $BOTH"'],
                   env={"REQ_VAR": "from-request", "BOTH": "request"})
    assert res["stdout"] == "from-sandbox from-request request\n", res


def test_cwd(api, make_sandbox):
    sb = make_sandbox(workdir="/tmp")
    assert api.exec(sb["id"], cmd=["pwd"])["stdout"] == "/tmp\n"
    assert api.exec(sb["id"], cmd=["pwd"], cwd="/usr")["stdout"] == "/usr\n"
    r = api.request("POST", f"/v1/sandboxes/{sb['id']}/exec",
                    json={"cmd": ["pwd"], "cwd": "/no/such/dir"})
    assert (r.status in (400, 404) and "/no/such/dir" in r.error_message) or \
        (r.status == 200 and r.json()["exit_code"] != 0), r


def test_user(api, sandbox):
    sid = sandbox["id"]
    assert api.exec(sid, cmd=["id", "-u"])["stdout"] == "0\n"
    assert api.exec(sid, cmd=["id", "-u"], user="root")["stdout"] == "0\n"
    assert api.exec(sid, cmd=["id", "-u"], user="user", cwd="/tmp")["stdout"] == "1000\n"
    r = api.request("POST", f"/v1/sandboxes/{sid}/exec",
                    json={"cmd": ["id"], "user": "no-such-user"})
    assert r.status in (400, 404), r
    assert "no-such-user" in r.error_message


def test_user_without_cwd_starts_somewhere_it_may_enter(api, sandbox):
    """exec as `user` with no cwd must work: the default cwd must not be root's 0700 home."""
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "id -u; pwd"], user="user")
    assert res["exit_code"] == 0, res
    assert res["stdout"].startswith("1000\n"), res


@pytest.mark.process_only("host uid maps of the sandbox's processes; a microvm guest's "
                         "uids live in its own kernel (test_microvm checks QEMU's uid)")
def test_user_is_unprivileged_on_the_host(api, sandbox):
    """Root inside is not root outside: judge the host uid of a sandbox process."""
    sid = sandbox["id"]
    p = api.start_process(sid, cmd=["sleep", "60"], tag="uidprobe")
    q = api.start_process(sid, cmd=["sleep", "61"], user="user", cwd="/tmp")
    try:
        init = ic.sandbox_init_pid(sid)
        m = ic.uid_map(init)
        assert m and len(m) == 1 and m[0][0] == 0, m
        base = m[0][1]
        assert base >= 65536, f"sandbox root maps to host uid {base}"

        def sleepers():
            out = {}
            for pid in ic.sandbox_host_pids(sid):
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                except OSError:
                    continue
                if cmd[:1] == [b"sleep"]:
                    out[cmd[1]] = ic.host_uid(pid)
            return out if len(out) == 2 else None

        uids = ic.wait_for(sleepers, 10, what="both sleep processes in the sandbox cgroup")
        assert uids[b"60"] == base, uids
        assert uids[b"61"] == base + 1000, uids
    finally:
        for x in (p, q):
            api.request("POST", f"/v1/sandboxes/{sid}/processes/{x['pid']}/signal",
                        json={"signal": "KILL"})


def test_timeout(api, sandbox):
    t0 = time.monotonic()
    res = api.exec(sandbox["id"], cmd=["sleep", "30"], timeout=1)
    assert res["timed_out"] is True, res
    assert time.monotonic() - t0 < 15
    assert res["duration_ms"] < 15000


def test_output_cap(api, sandbox):
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "yes | head -c 100000; echo e >&2"],
                   max_output=1000)
    assert res["exit_code"] == 0, res
    assert res["stdout_truncated"] is True, {k: v for k, v in res.items() if k != "stdout"}
    assert res["stdout_bytes"] == 100000
    assert 0 < len(res["stdout"]) <= 1000
    assert res["stdout"] == "y\n" * (len(res["stdout"]) // 2)
    assert res["stderr_truncated"] is False and res["stderr"] == "e\n"


def test_large_output_uncapped_is_complete(api, sandbox):
    # 3 MiB crosses the agent's 256 KiB credit window many times: nothing lost, in order.
    res = api.exec(sandbox["id"], cmd=["python3", "-c",
                                       "import sys\n"
                                       "for i in range(300000): sys.stdout.write('%09d\\n' % i)"],
                   max_output=8 << 20)
    assert res["exit_code"] == 0
    assert res["stdout_truncated"] is False
    lines = res["stdout"].splitlines()
    assert len(lines) == 300000
    assert lines[0] == "000000000" and lines[-1] == "000299999"
    assert [int(x) for x in lines[::1000]] == list(range(0, 300000, 1000))


def test_stdin_field(api, sandbox):
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "cat; echo; wc -c"], stdin="hello")
    assert res["stdout"].startswith("hello\n"), res
    res = api.exec(sandbox["id"], cmd=["wc", "-c"], stdin="x" * 100000)
    assert res["stdout"].strip() == "100000", res


def test_no_stdin_gives_eof(api, sandbox):
    # A command reading stdin must see EOF at once, not hang until the timeout.
    res = api.exec(sandbox["id"], cmd=["cat"], timeout=10)
    assert res["timed_out"] is False and res["exit_code"] == 0 and res["stdout"] == "", res


def test_bad_exec_requests(api, sandbox):
    sid = sandbox["id"]
    for body, word in [({}, "cmd"), ({"cmd": []}, "cmd"), ({"cmd": "echo"}, "cmd"),
                       ({"cmd": ["true"], "command": "true"}, "cmd"),
                       ({"cmd": [1, 2]}, "cmd"), ({"cmd": ["true"], "timeout": -1}, "timeout"),
                       ({"cmd": ["true"], "bogus": 1}, "bogus"),
                       ({"cmd": ["true"], "env": {"A": 1}}, "env")]:
        r = api.request("POST", f"/v1/sandboxes/{sid}/exec", json=body)
        assert r.status == 400, (body, r)
        assert r.error_code == "invalid"
        assert word in r.error_message, (body, r.error_message)


@pytest.mark.parametrize("how", ["accept", "query"])
def test_ndjson_stream(api, sandbox, how):
    kw = {"kind": "ndjson"} if how == "accept" else {"query": {"stream": "ndjson"}}
    with api.stream("POST", f"/v1/sandboxes/{sandbox['id']}/exec",
                    json={"cmd": ["sh", "-c", "echo a; echo b >&2; exit 5"]}, **kw) as s:
        assert s.status == 200, s.body_if_error()
        assert "application/x-ndjson" in s.headers.get("Content-Type", "")
        events = s.read_all(timeout=20)
    got = ic.collect(events)
    assert got["types"][0] == "start", got["types"]
    assert isinstance(events[0]["pid"], int) and events[0]["pid"] > 0
    assert got["types"][-1] == "exit", got["types"]
    assert got["stdout"] == b"a\n" and got["stderr"] == b"b\n"
    assert got["exit"]["exit_code"] == 5


@pytest.mark.parametrize("how", ["accept", "query"])
def test_sse_stream(api, sandbox, how):
    kw = {"kind": "sse"} if how == "accept" else {"query": {"stream": "sse"}, "kind": None}
    with api.stream("POST", f"/v1/sandboxes/{sandbox['id']}/exec",
                    json={"cmd": ["sh", "-c", "printf 'x\\0y'; echo err >&2"]}, **kw) as s:
        assert s.status == 200, s.body_if_error()
        assert "text/event-stream" in s.headers.get("Content-Type", "")
        s.kind = "sse"
        events = s.read_all(timeout=20)
    got = ic.collect(events)
    assert got["types"][0] == "start" and got["types"][-1] == "exit", got["types"]
    assert got["stdout"] == b"x\0y", got  # binary-safe (base64)
    assert got["stderr"] == b"err\n"
    assert got["exit"]["exit_code"] == 0


def test_stream_is_flushed_as_produced(api, sandbox):
    """The command prints `ready`, then waits for /tmp/go. We create /tmp/go only after we
    have read `ready` from the stream: a server that buffers output deadlocks, the bounded
    read times out, and the test fails (no timing assertion involved)."""
    sid = sandbox["id"]
    script = "echo ready; while [ ! -f /tmp/go ]; do sleep 0.05; done; echo done"
    with api.stream("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["sh", "-c", script],
                    "timeout": 60}, kind="ndjson", timeout=20) as s:
        assert s.status == 200, s.body_if_error()
        s.read_output_until(b"ready\n", timeout=20)
        assert b"done" not in ic.collect(s.events)["stdout"]
        api.write_file(sid, "/tmp/go", b"")  # a second connection, while the stream is open
        s.read_until(lambda ev: ev.get("type") == "exit", timeout=20)
    got = ic.collect(s.events)
    assert got["stdout"] == b"ready\ndone\n"
    assert got["exit"]["exit_code"] == 0


def test_sse_stream_is_flushed_as_produced(api, sandbox):
    sid = sandbox["id"]
    script = "echo ready; while [ ! -f /tmp/go2 ]; do sleep 0.05; done; echo done"
    with api.stream("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": ["sh", "-c", script],
                    "timeout": 60}, kind="sse", timeout=20) as s:
        assert s.status == 200, s.body_if_error()
        s.read_output_until(b"ready\n", timeout=20)
        api.write_file(sid, "/tmp/go2", b"")
        s.read_until(lambda ev: ev.get("type") == "exit", timeout=20)
    assert ic.collect(s.events)["stdout"] == b"ready\ndone\n"


def test_concurrent_execs(api, sandbox):
    """Several execs at once in one sandbox each get their own output."""
    sid = sandbox["id"]
    results, errors = {}, []

    def one(i):
        try:
            results[i] = api.exec(sid, cmd=["sh", "-c", f"sleep 0.3; echo {i}"])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    assert {i: r["stdout"] for i, r in results.items()} == {i: f"{i}\n" for i in range(8)}


def test_client_disconnect_does_not_hurt(api, sandbox):
    """A client that drops a streaming exec mid-way leaves the daemon healthy."""
    sid = sandbox["id"]
    s = api.stream("POST", f"/v1/sandboxes/{sid}/exec",
                   json={"cmd": ["sh", "-c", "echo go; sleep 30"], "timeout": 40}, kind="ndjson")
    assert s.status == 200
    s.read_output_until(b"go", timeout=20)
    s.close()
    assert api.exec(sid, cmd=["echo", "ok"])["stdout"] == "ok\n"


def test_oom_killed(api, make_sandbox, tier):
    # 128M: the smallest microvm (its guest kernel keeps ~50M); far below the 512M asked for.
    sb = make_sandbox(memory="128M")
    res = api.exec(sb["id"], cmd=["python3", "-c",
                                  "b = b'\\x01' * (512 << 20); print(len(b))"], timeout=60)
    assert res["oom_killed"] is True, res
    assert res["exit_code"] != 0 or res["signal"] in (9, "KILL", "SIGKILL"), res
    assert "536870912" not in res["stdout"]
    # The sandbox survives its command's OOM.
    assert api.exec(sb["id"], cmd=["echo", "alive"])["stdout"] == "alive\n"


def test_oom_killed_after_restart_and_in_fork_child(make_sandbox, isolad):
    """oom_killed still holds after isolad was killed and restarted (microvm: isolad asks the
    guest's counters over a connection it makes again) and in a fork child (microvm: the
    guest's counter comes back with its memory)."""
    oom = ["python3", "-c", "b = b'\\x01' * (512 << 20); print(len(b))"]
    sid = make_sandbox(memory="128M")["id"]
    isolad.restart(kill9=True)
    api = isolad.client()
    res = api.exec(sid, cmd=oom, timeout=60)
    assert res["oom_killed"] is True and "536870912" not in res["stdout"], res
    assert api.exec(sid, cmd=["true"])["oom_killed"] is False
    r = api.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 1}, timeout=120)
    assert r.status == 201, r
    child = r.json()["children"][0]["id"]
    try:
        res = api.exec(child, cmd=oom, timeout=60)
        assert res["oom_killed"] is True, res
        assert api.exec(child, cmd=["echo", "alive"])["stdout"] == "alive\n"
    finally:
        api.request("DELETE", f"/v1/sandboxes/{child}", timeout=60)
