# SPDX-License-Identifier: Apache-2.0
"""The real `isola` CLI against the real isolad: every command, human and --json forms,
exit statuses, stdin forwarding, PTYs (the CLI runs on a pseudo-terminal), cp both ways,
fs commands, template import of images built here."""

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
import uuid

import pytest

import imagebuild
import isola_client as ic


def ok(cp):
    assert cp.returncode == 0, f"exit {cp.returncode}; stdout {cp.stdout!r} stderr {cp.stderr!r}"
    return cp.stdout.decode()


def jout(cp):
    return json.loads(ok(cp))


def ndjson(cp):
    return [json.loads(ln) for ln in cp.stdout.decode().splitlines() if ln.strip()]


def run_in_pty(argv, input_steps=(), rows=24, cols=80, timeout=30, env=None):
    """Runs argv with stdin/stdout/stderr on a new pseudo-terminal of rows x cols.
    input_steps: [(wait_for_regex_or_None, bytes_to_send)]. Returns (status, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def child_setup():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                         preexec_fn=child_setup, env=env)
    os.close(slave)
    out = b""
    steps = list(input_steps)
    deadline = time.monotonic() + timeout
    try:
        while True:
            while steps and (steps[0][0] is None or re.search(steps[0][0], out)):
                os.write(master, steps.pop(0)[1])
            left = deadline - time.monotonic()
            if left <= 0:
                p.kill()
                raise AssertionError(f"{argv} on a pty did not finish; output {out[-800:]!r}")
            r, _, _ = select.select([master], [], [], min(left, 0.5))
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every slave fd closed
                    chunk = b""
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                # Drain what is left, then stop.
                try:
                    while select.select([master], [], [], 0.2)[0]:
                        c = os.read(master, 65536)
                        if not c:
                            break
                        out += c
                except OSError:
                    pass
                break
        return p.wait(10), out
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait(5)


def test_version(cli):
    assert re.fullmatch(r"isola \d+\.\d+\.\d+\S*\n", ok(cli("version")))
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", jout(cli("version", json=True))["version"])


def test_help_and_usage_errors(cli):
    out = ok(cli("help"))
    for cmd in ("run", "create", "ls", "inspect", "rm", "exec", "ps", "logs", "kill", "cp", "fs",
                "template", "doctor", "version"):
        assert re.search(rf"^\s+{cmd}\b", out, re.M), f"`{cmd}` missing from help"
    cp = cli("no-such-command")
    assert cp.returncode == 2 and b"no-such-command" in cp.stderr
    cp = cli("exec")
    assert cp.returncode == 2, cp
    cp = cli("create", "--memory")
    assert cp.returncode == 2, cp


def test_doctor(cli):
    out = ok(cli("doctor"))
    assert out.strip()
    assert isinstance(jout(cli("doctor", json=True)), dict)


def test_daemon_unreachable(cli, tmp_path):
    cp = subprocess.run([cli.path, "--socket", str(tmp_path / "nothing.sock"), "ls"],
                        capture_output=True, timeout=20)
    assert cp.returncode == 1, cp
    assert b"nothing.sock" in cp.stderr, cp.stderr


def test_run(cli, api):
    before = sorted(s["id"] for s in api.list_sandboxes())
    cp = cli("run", "--", "python3", "-c", "print(6*7)")
    assert ok(cp) == "42\n"
    cp = cli("run", "--", "sh", "-c", "exit 7")
    assert cp.returncode == 7, cp
    cp = cli("run", "--", "sh", "-c", "echo out; echo err >&2; kill -9 $$")
    assert cp.returncode == 128 + 9, cp
    assert cp.stdout == b"out\n" and b"err\n" in cp.stderr
    cp = cli("run", "--env", "A=1", "--env", "B=two", "--workdir", "/tmp", "--memory", "256M",
             "--cpu", "1", "--", "sh", "-c", 'echo "$A $B $(pwd)"; cat /proc/self/cgroup >/dev/null')
    assert ok(cp) == "1 two /tmp\n"
    cp = cli("run", "--tier", "process", "--timeout", "1", "--", "sleep", "30", timeout=40)
    assert cp.returncode == 124, cp
    # run cleans up after itself.
    assert sorted(s["id"] for s in api.list_sandboxes()) == before


def test_run_errors(cli, api):
    before = sorted(s["id"] for s in api.list_sandboxes())
    cp = cli("run", "--template", "no-such-template", "--", "true")
    assert cp.returncode == 125, cp  # isola failed, not the command
    assert b"no-such-template" in cp.stderr
    cp = cli("run", "--memory", "lots", "--", "true")
    assert cp.returncode in (2, 125), cp
    assert b"memory" in cp.stderr
    cp = cli("run", "--tier", "bogus", "--", "true")
    assert cp.returncode in (2, 125), cp
    assert b"bogus" in cp.stderr
    cp = cli("run")
    assert cp.returncode == 2, cp
    assert sorted(s["id"] for s in api.list_sandboxes()) == before


def test_create_ls_inspect_rm(cli, api):
    tag = uuid.uuid4().hex[:8]
    sid = ok(cli("create", "--label", f"cli={tag}", "--label", "k=v", "--ttl", "300",
                 "--memory", "128M")).strip()
    try:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", sid), sid
        sb = api.get_json(f"/v1/sandboxes/{sid}")
        assert sb["labels"] == {"cli": tag, "k": "v"}
        assert sb["memory"] == 128 << 20
        assert sb["expires_at"] is not None
        sid2 = jout(cli("create", "--label", f"cli={tag}", json=True))["id"]
        # ls, human and --json, with a label filter.
        out = ok(cli("ls", "--label", f"cli={tag}"))
        assert sid in out and sid2 in out
        assert out.splitlines()[0].split()[:2] == ["ID", "NAME"], out
        listed = jout(cli("ls", "--label", f"cli={tag}", "--label", "k=v", json=True))
        assert [s["id"] for s in listed] == [sid], listed
        assert jout(cli("ls", "--label", f"cli=nothing-{tag}", json=True)) == []
        # inspect, human and --json.
        out = ok(cli("inspect", sid))
        assert re.search(rf"^id: {sid}$", out, re.M), out
        assert re.search(r"^state: running$", out, re.M), out
        assert jout(cli("inspect", sid, json=True))["id"] == sid
        cp = cli("inspect", "no-such-sandbox")
        assert cp.returncode == 1 and b"no-such-sandbox" in cp.stderr, cp
        # rm, human and --json; a missing id fails but the others are removed.
        assert ok(cli("rm", sid)).strip() == sid
        res = cli("rm", sid2, "no-such-sandbox", json=True)
        assert res.returncode == 1
        res = json.loads(res.stdout)
        assert res["removed"] == [sid2]
        assert res["failed"][0]["id"] == "no-such-sandbox"
        assert res["failed"][0]["code"] == "not_found"
    finally:
        for x in (sid,):
            api.delete_sandbox(x)
    assert api.request("GET", f"/v1/sandboxes/{sid}").status == 410  # ended (tombstone)


def test_exec(cli, sandbox):
    sid = sandbox["id"]
    cp = cli("exec", sid, "--", "sh", "-c", "echo hi; echo oops >&2; exit 3")
    assert cp.returncode == 3 and cp.stdout == b"hi\n" and cp.stderr == b"oops\n", cp
    assert ok(cli("exec", "--env", "V=x", "--workdir", "/usr", sid, "--", "sh", "-c",
                  'echo "$V $(pwd)"')) == "x /usr\n"
    assert ok(cli("exec", "--user", "user", "--workdir", "/tmp", sid, "--", "id", "-u")) == "1000\n"
    cp = cli("exec", "--timeout", "1", sid, "--", "sleep", "30", timeout=40)
    assert cp.returncode == 124, cp
    # Binary output passes through untouched.
    cp = cli("exec", sid, "--", "sh", "-c", "printf '\\000\\377\\001'")
    assert cp.stdout == b"\x00\xff\x01", cp
    # --json: the event stream as NDJSON.
    events = ndjson(cli("exec", sid, "--", "sh", "-c", "echo j; exit 2", json=True))
    got = ic.collect(events)
    assert got["stdout"] == b"j\n" and got["exit"]["exit_code"] == 2, events
    cp = cli("exec", "no-such-sandbox", "--", "true")
    assert cp.returncode == 125 and b"no-such-sandbox" in cp.stderr, cp


def test_exec_stdin(cli, sandbox):
    sid = sandbox["id"]
    data = os.urandom(200000)
    cp = cli("exec", "-i", sid, "--", "sha256sum", input=data)
    import hashlib
    assert ok(cp).split()[0] == hashlib.sha256(data).hexdigest()
    # Without -i, stdin is not forwarded: the command sees EOF.
    cp = cli("exec", sid, "--", "wc", "-c", input=b"ignored")
    assert ok(cp).strip() == "0"


def test_exec_tty(cli, sandbox, isolad):
    sid = sandbox["id"]
    argv = [cli.path, "--socket", isolad.socket, "exec", "-t", sid, "--", "sh", "-c",
            "tty; stty size; [ -t 0 ] && echo IN-TTY; exit 5"]
    status, out = run_in_pty(argv, rows=33, cols=101)
    assert status == 5, out
    assert re.search(rb"/dev/pts/\d+", out), out
    assert b"33 101" in out, out
    assert b"IN-TTY" in out, out
    # Interactive: -it with a shell, typed input echoes back through the terminal.
    argv = [cli.path, "--socket", isolad.socket, "exec", "-i", "-t", sid, "--", "sh"]
    status, out = run_in_pty(argv, input_steps=[(None, b"echo $((40+2))\n"),
                                                (rb"42", b"exit 4\n")])
    assert status == 4, out
    assert b"42" in out


def test_exec_detached_ps_logs_kill(cli, api, sandbox):
    sid = sandbox["id"]
    out = ok(cli("exec", "-d", sid, "--", "sh", "-c", "echo started; exec sleep 300"))
    pid = int(out.strip())
    ic.wait_for(lambda: b"started" in cli("logs", sid, pid).stdout, 10, what="logs")
    assert ok(cli("logs", sid, pid)) == "started\n"
    ps = ok(cli("ps", sid))
    assert re.search(rf"^\s*{pid}\s", ps, re.M), ps
    assert "running" in ps
    listed = jout(cli("ps", sid, json=True))
    listed = ic.item_list(listed, "processes")
    assert [p for p in listed if p["pid"] == pid and p["running"]], listed
    # logs -f follows until the process ends; kill it from another CLI call.
    f = subprocess.Popen([cli.path, "--socket", api.socket_path, "logs", "-f", sid, str(pid)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ok(cli("kill", sid, pid))
        fout, ferr = f.communicate(timeout=20)
    finally:
        if f.poll() is None:
            f.kill()
            f.wait(5)
    assert fout == b"started\n", (fout, ferr)
    assert f.returncode == 0, (f.returncode, ferr)
    ex = api.wait_process(sid, pid, timeout=10)
    assert ex["signal"] in (15, "TERM", "SIGTERM"), ex
    # kill with an explicit signal; --json detach prints an object with the pid.
    pid2 = jout(cli("exec", "-d", sid, "--", "sleep", "300", json=True))["pid"]
    ok(cli("kill", sid, pid2, "KILL"))
    assert api.wait_process(sid, pid2, timeout=10)["signal"] in (9, "KILL", "SIGKILL")
    cp = cli("kill", sid, pid2, "NOSUCHSIG")
    assert cp.returncode == 2, cp
    cp = cli("exec", "-d", "-i", sid, "--", "true")
    assert cp.returncode == 2, cp


def make_host_tree(d):
    (d / "sub" / "deeper").mkdir(parents=True)
    (d / "a.txt").write_text("A")
    (d / "sub" / "b.txt").write_text("B")
    (d / "sub" / "deeper" / "c.sh").write_text("#!/bin/sh\necho C\n")
    os.chmod(d / "sub" / "deeper" / "c.sh", 0o755)
    os.symlink("a.txt", d / "link")


def test_cp_upload_file_and_dir(cli, api, sandbox, tmp_path):
    sid = sandbox["id"]
    src = tmp_path / "f.bin"
    data = os.urandom(100000)
    src.write_bytes(data)
    ok(cli("cp", src, f"{sid}:/tmp/f.bin"))
    assert api.read_file(sid, "/tmp/f.bin") == data
    d = tmp_path / "tree"
    make_host_tree(d)
    api.sh(sid, "mkdir -p /tmp/into")
    ok(cli("cp", d, f"{sid}:/tmp/into"))
    listing = api.sh(sid, "cd /tmp/into && find . | sort").split()
    assert listing == [".", "./tree", "./tree/a.txt", "./tree/link", "./tree/sub",
                       "./tree/sub/b.txt", "./tree/sub/deeper", "./tree/sub/deeper/c.sh"], listing
    assert api.exec(sid, cmd=["/tmp/into/tree/sub/deeper/c.sh"])["stdout"] == "C\n"
    assert api.sh(sid, "readlink /tmp/into/tree/link") == "a.txt\n"
    # To a new name (DST does not exist): the dir is created as DST.
    ok(cli("cp", d, f"{sid}:/tmp/renamed"))
    assert api.read_file(sid, "/tmp/renamed/sub/b.txt") == b"B"
    # errors: both sides local; missing local source
    cp = cli("cp", src, tmp_path / "g.bin")
    assert cp.returncode == 2, cp
    cp = cli("cp", tmp_path / "nope", f"{sid}:/tmp/x")
    assert cp.returncode == 1 and b"nope" in cp.stderr, cp


@pytest.mark.parametrize("dest", ["absolute", "relative"])
def test_cp_download_file_and_dir(cli, api, sandbox, tmp_path, dest):
    sid = sandbox["id"]
    data = os.urandom(100000)
    api.write_file(sid, "/tmp/f.bin", data)
    api.sh(sid, "mkdir -p /tmp/tree/sub/deeper && echo -n A > /tmp/tree/a.txt && "
                "echo -n B > /tmp/tree/sub/b.txt && printf '#!/bin/sh\\necho C\\n' > "
                "/tmp/tree/sub/deeper/c.sh && chmod 755 /tmp/tree/sub/deeper/c.sh && "
                "ln -s a.txt /tmp/tree/link")

    def where(name):
        return tmp_path / name if dest == "absolute" else name

    ok(cli("cp", f"{sid}:/tmp/f.bin", where("back.bin"), cwd=tmp_path))
    assert (tmp_path / "back.bin").read_bytes() == data
    ok(cli("cp", f"{sid}:/tmp/tree", where("copy"), cwd=tmp_path))
    assert (tmp_path / "copy" / "a.txt").read_text() == "A"
    assert (tmp_path / "copy" / "sub" / "b.txt").read_text() == "B"
    assert (tmp_path / "copy" / "sub" / "deeper" / "c.sh").stat().st_mode & 0o111
    assert os.readlink(tmp_path / "copy" / "link") == "a.txt"
    # Into an existing directory: lands as DIR/tree.
    (tmp_path / "existing").mkdir()
    ok(cli("cp", f"{sid}:/tmp/tree", where("existing"), cwd=tmp_path))
    assert (tmp_path / "existing" / "tree" / "sub" / "b.txt").read_text() == "B"
    cp = cli("cp", f"{sid}:/tmp/missing", where("x"), cwd=tmp_path)
    assert cp.returncode == 1 and b"/tmp/missing" in cp.stderr, cp
    assert not (tmp_path / "x").exists()


def test_cp_refuses_hostile_download_names(cli, api, sandbox, tmp_path):
    """A sandbox cannot make `isola cp ID:dir host-dir` write outside host-dir: the CLI sees
    only the entries isolad's archive gives it, named under the copied dir."""
    sid = sandbox["id"]
    api.sh(sid, "mkdir -p /tmp/ev && ln -s /etc /tmp/ev/etc-link && ln -s ../../../../tmp "
                "/tmp/ev/up && echo x > /tmp/ev/plain")
    dst = tmp_path / "out"
    ok(cli("cp", f"{sid}:/tmp/ev", "out", cwd=tmp_path))  # relative: see the absolute-path test
    assert (dst / "plain").read_text() == "x\n"
    # Symlinks arrive as symlinks (not followed on the host).
    assert os.path.islink(dst / "etc-link") and os.readlink(dst / "etc-link") == "/etc"
    assert os.path.islink(dst / "up")


def test_fs_commands(cli, api, sandbox, tmp_path):
    sid = sandbox["id"]
    ok(cli("fs", "mkdir", "-p", sid, "/tmp/fs/a/b"))
    assert api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/tmp/fs/a/b"})[
        "type"] == "dir"
    cp = cli("fs", "mkdir", sid, "/tmp/fs/x/y")
    assert cp.returncode == 1, cp
    # write from a pipe (chunked) and from a regular file (sized)
    ok(cli("fs", "write", sid, "/tmp/fs/piped", input=b"from a pipe\n"))
    assert api.read_file(sid, "/tmp/fs/piped") == b"from a pipe\n"
    f = tmp_path / "in"
    f.write_bytes(b"\x00" * 70000 + b"end")
    with open(f, "rb") as fh:
        cp = subprocess.run([cli.path, "--socket", api.socket_path, "fs", "write", sid,
                             "/tmp/fs/a/file"], stdin=fh, capture_output=True, timeout=30)
    ok(cp)
    assert api.read_file(sid, "/tmp/fs/a/file") == f.read_bytes()
    # cat
    assert cli("fs", "cat", sid, "/tmp/fs/a/file").stdout == f.read_bytes()
    # ls, human and --json, with depth
    out = ok(cli("fs", "ls", sid, "/tmp/fs"))
    assert sorted(out.split()) == ["a", "piped"], out
    out = ok(cli("fs", "ls", "-l", sid, "/tmp/fs"))
    assert "piped" in out and "12" in out
    listed = ic.item_list(jout(cli("fs", "ls", "--depth", "3", sid, "/tmp/fs", json=True)),
                          "entries")
    assert "/tmp/fs/a/b" in [e["path"] for e in listed], listed
    # stat
    out = ok(cli("fs", "stat", sid, "/tmp/fs/piped"))
    assert re.search(r"^size: 12$", out, re.M) and re.search(r"^type: file$", out, re.M), out
    assert jout(cli("fs", "stat", sid, "/tmp/fs/piped", json=True))["size"] == 12
    # mv
    ok(cli("fs", "mv", sid, "/tmp/fs/piped", "/tmp/fs/moved"))
    assert api.read_file(sid, "/tmp/fs/moved") == b"from a pipe\n"
    # rm, rm -r
    cp = cli("fs", "rm", sid, "/tmp/fs/a")
    assert cp.returncode == 1, cp
    ok(cli("fs", "rm", sid, "/tmp/fs/moved"))
    ok(cli("fs", "rm", "-r", sid, "/tmp/fs"))
    assert api.request("GET", f"/v1/sandboxes/{sid}/fs/stat",
                       query={"path": "/tmp/fs"}).status == 404
    cp = cli("fs", "cat", sid, "/tmp/fs/nothing")
    assert cp.returncode == 1 and b"/tmp/fs/nothing" in cp.stderr, cp
    cp = cli("fs", "frobnicate", sid, "/tmp")
    assert cp.returncode == 2, cp


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    return imagebuild.build_hello(tmp_path_factory.mktemp("hello-cli"))


@pytest.mark.parametrize("fmt", ["docker-archive", "oci"])
def test_template_import_ls_run_rm(cli, api, hello, tmp_path, fmt):
    name = f"cli-{fmt}-{uuid.uuid4().hex[:6]}"
    tar = tmp_path / "image.tar"
    tar.write_bytes(imagebuild.docker_archive(hello) if fmt == "docker-archive"
                    else imagebuild.oci_layout(hello))
    cp = cli("template", "import", name, tar, timeout=180)
    assert ok(cp).strip() == name
    try:
        out = ok(cli("template", "ls"))
        assert re.search(rf"^{re.escape(name)}\s", out, re.M), out
        assert re.search(r"^host\s", out, re.M), out
        listed = ic.item_list(jout(cli("template", "ls", json=True)), "templates")
        assert [t for t in listed if t["name"] == name and t["source"] == fmt], listed
        cp = cli("run", "--template", name, "--", "/hello")
        assert ok(cp) == "hello from template\n"
        cp = cli("run", "--template", name, "--", "/hello", "exit", "6")
        assert cp.returncode == 6, cp
        # A duplicate import fails and leaves the first.
        cp = cli("template", "import", name, tar, timeout=180)
        assert cp.returncode == 1, cp
        assert name.encode() in cp.stderr
    finally:
        out = cli("template", "rm", name)
    assert ok(out).strip() == name
    assert name not in ok(cli("template", "ls"))
    res = cli("template", "rm", name, json=True)
    assert res.returncode == 1 and name.encode() in res.stderr, res


def test_template_import_json_progress(cli, hello, tmp_path):
    name = f"cli-json-{uuid.uuid4().hex[:6]}"
    tar = tmp_path / "image.tar"
    tar.write_bytes(imagebuild.docker_archive(hello))
    events = ndjson(cli("template", "import", name, tar, json=True, timeout=180))
    try:
        assert events and events[-1]["type"] == "done", events
        assert events[-1]["template"]["name"] == name
    finally:
        ok(cli("template", "rm", name))
    cp = cli("template", "import", f"cli-missing-{uuid.uuid4().hex[:6]}", tmp_path / "none.tar")
    assert cp.returncode == 1 and b"none.tar" in cp.stderr, cp


def test_cli_over_tcp_with_token(isolad, cli):
    env = {"ISOLA_URL": isolad.url, "ISOLA_TOKEN": isolad.token}
    cp = subprocess.run([cli.path, "ls"], env={**os.environ, **env}, capture_output=True,
                        timeout=30)
    assert cp.returncode == 0, cp
    cp = subprocess.run([cli.path, "--url", isolad.url, "--token", "wrong", "ls"],
                        capture_output=True, timeout=30)
    assert cp.returncode == 1, cp
    assert b"401" in cp.stderr or b"unauthor" in cp.stderr.lower() or b"token" in cp.stderr, cp
