# SPDX-License-Identifier: Apache-2.0
"""isola-runc, the OCI runtime (docs/oci.md): a bundle made by hand from host binaries and
`isola-runc spec`, driven through create/start/state/kill/delete and run against the session's
real isolad; the container is a process-tier sandbox with isola's hardening."""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import isola_client as ic  # noqa: E402
from tenancy_util import ROOT_CONFTEST as conftest  # noqa: E402
from tenancy_util import Tenant  # noqa: E402

RUNC = Path(os.environ.get("ISOLA_RUNC") or conftest.BUILD / "src" / "runc" / "isola-runc")
BINARIES = ("sh", "cat", "sleep", "id", "grep", "stty", "bash", "mkdir")
CAP_SYS_ADMIN = 21
CAP_SYS_RESOURCE = 24
HOST_NETNS = f"/proc/{os.getpid()}/ns/net"  # this test's network namespace: the host's


def make_rootfs(root, extra=()):
    """A tiny rootfs: a few dynamically linked host binaries (BINARIES and extra) with their
    libraries."""
    for d in ("bin", "etc", "proc", "dev", "sys", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for name in BINARIES + tuple(extra):
        src = shutil.which(name)
        assert src, f"host binary `{name}` missing"
        shutil.copy2(os.path.realpath(src), root / "bin" / name)
        out = subprocess.run(["ldd", src], capture_output=True, text=True, check=True).stdout
        for word in out.split():
            if word.startswith("/") and os.path.exists(word):
                dst = root / word.lstrip("/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                if not dst.exists():
                    shutil.copy2(os.path.realpath(word), dst)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                         "app:x:1000:1000:app:/tmp:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\napp:x:1000:\n")


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory):
    root = tmp_path_factory.mktemp("oci-rootfs") / "rootfs"
    make_rootfs(root)
    return root


class Runc:
    """isola-runc with its own --root, talking to the session isolad's unix socket."""

    def __init__(self, isolad, state_root):
        if not os.access(RUNC, os.X_OK):
            pytest.fail(f"`{RUNC}` is missing: build first", pytrace=False)
        self.isolad = isolad
        self.root = state_root

    def __call__(self, *args, cwd=None, timeout=120, check=False, pass_fds=(), socket=True):
        env = dict(os.environ, ISOLA_SOCKET=self.isolad.socket)
        if not socket:  # as an engine's later call may come: without isolad's location
            env.pop("ISOLA_SOCKET")
        env.pop("ISOLA_URL", None)
        env.pop("ISOLA_TOKEN", None)
        # Files, not pipes: `create` leaves an output relay holding its stdout/stderr (as
        # runc's init does) until the container's process ends.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.run([str(RUNC), "--root", str(self.root)] + [str(a) for a in args],
                               stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                               timeout=timeout, env=env, cwd=cwd, pass_fds=pass_fds)
            out.seek(0)
            err.seek(0)
            cp = subprocess.CompletedProcess(p.args, p.returncode, out.read().decode(),
                                             err.read().decode())
        rep = conftest.sanitizer_report(cp.stderr)
        assert rep is None, f"sanitizer report from isola-runc {args}:\n{rep}"
        if check:
            assert cp.returncode == 0, f"isola-runc {args}: {cp.returncode} {cp.stderr}"
        return cp

    def state(self, cid):
        return json.loads(self("state", cid, check=True).stdout)

    def wait_status(self, cid, want, deadline_s=60):
        end = time.monotonic() + deadline_s
        while True:
            st = self.state(cid)
            if st["status"] == want:
                return st
            assert time.monotonic() < end, f"container {cid} still {st['status']}, want {want}"
            time.sleep(0.1)


@pytest.fixture
def runc(isolad, tmp_path):
    r = Runc(isolad, tmp_path / "runc-root")
    yield r
    # Nothing of a test may stay behind: every container it made is deleted.
    if r.root.exists():
        for d in r.root.iterdir():
            r("delete", "--force", d.name)


def make_bundle(runc, rootfs, tmp_path, args, edit=None):
    """A bundle dir: `isola-runc spec`'s config.json with args, and root.path -> rootfs."""
    b = tmp_path / "bundle"
    b.mkdir()
    runc("spec", "--bundle", b, check=True)
    cfg = json.loads((b / "config.json").read_text())
    assert cfg["ociVersion"].startswith("1.") and cfg["root"]["path"] == "rootfs"
    cfg["process"]["args"] = args
    cfg["root"]["path"] = str(rootfs)
    if edit:
        edit(cfg)
    (b / "config.json").write_text(json.dumps(cfg))
    return b


def kill_leftovers(d):
    """SIGKILLs processes whose command line names our own dir d (an engine's shims and
    runtime processes left by a failure), by pid: nothing else is touched."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            if str(d).encode() in (p / "cmdline").read_bytes():
                os.kill(int(p.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def remove_engine_dir(d):
    """Takes away an engine's private dir d: the processes naming it (kill_leftovers), then
    the mounts under it (an engine may leave a netns bind mount), deepest first, then d."""
    kill_leftovers(d)
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for m in sorted((m for m in mounts if m.startswith(str(d) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], check=False)
    shutil.rmtree(d, ignore_errors=True)


def process_gone(pid):
    """True once pid has exited (gone, or a zombie nobody of ours reaps yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def sandboxes(isolad, **labels):
    c = isolad.client(timeout=30)
    q = "&".join(f"label={k}={v}" for k, v in labels.items())
    r = c.request("GET", "/v1/sandboxes" + (f"?{q}" if q else ""))
    assert r.status == 200, r
    return r.json()["sandboxes"]


def test_run_prints_output_and_exits_with_status(runc, rootfs, tmp_path, isolad):
    b = make_bundle(runc, rootfs, tmp_path,
                    ["sh", "-c", "echo hello from $GREETING; cat /etc/passwd >&2; exit 3"],
                    lambda c: c["process"]["env"].append("GREETING=oci"))
    cp = runc("run", "--bundle", b, "r1")
    assert cp.returncode == 3, cp.stderr
    assert cp.stdout == "hello from oci\n"
    assert "app:x:1000" in cp.stderr
    # run deletes what it made: no state, no sandbox.
    assert not (runc.root / "r1").exists()
    assert sandboxes(isolad, **{"oci.id": "r1"}) == []


def test_later_calls_find_the_isolad_create_used(runc, rootfs, tmp_path, isolad):
    """Podman's cleanup runs `delete` without the `--runtime-flag isola-socket` it gave
    `create`: a call that names no isolad talks to the one recorded at create, so the sandbox
    is destroyed and the state dir removed (both leaked before)."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    runc("create", "--bundle", b, "so1", check=True)
    sid = runc.state("so1")["sandbox"]
    assert runc("state", "so1", socket=False, check=True).stdout
    runc("delete", "--force", "so1", socket=False, check=True)
    assert sandboxes(isolad, **{"oci.id": "so1"}) == [], sid
    assert not (runc.root / "so1").exists()


def test_relay_keeps_nothing_of_its_caller_but_stdio(runc, rootfs, tmp_path):
    """The relay lives as long as the container: it must not keep what its caller left open
    (containerd's shim leaves its listening ttrpc socket at fd 3 of every runtime it runs; a
    pipe kept open holds its reader's EOF). Only stdin, stdout and stderr stay."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    pidfile = tmp_path / "relay.pid"
    r, w = os.pipe()
    try:
        runc("create", "--bundle", b, "--pid-file", pidfile, "fd1", check=True, pass_fds=(w,))
        os.close(w)
        relay = int(pidfile.read_text())
        left = sorted(int(fd) for fd in os.listdir(f"/proc/{relay}/fd"))
        assert left == [0, 1, 2], [(fd, os.readlink(f"/proc/{relay}/fd/{fd}")) for fd in left]
        # Nobody else holds the pipe's write end: its reader sees EOF at once.
        assert os.read(r, 1) == b""
    finally:
        os.close(r)
        runc("delete", "--force", "fd1")


def test_lifecycle_create_start_state_kill_delete(runc, rootfs, tmp_path, isolad, cli):
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    pidfile = tmp_path / "init.pid"
    runc("create", "--bundle", b, "--pid-file", pidfile, "c1", check=True)
    st = runc.state("c1")
    assert st["status"] == "created" and st["id"] == "c1" and st["bundle"] == str(b)
    assert st["pid"] > 0 and Path(f"/proc/{st['pid']}").exists()
    # --pid-file holds the relay (an engine's shim waits on it), a live host process.
    relay = int(pidfile.read_text())
    assert relay != st["pid"] and Path(f"/proc/{relay}").exists()
    # The container is an isola sandbox: `isola ls` lists it with its bundle label.
    ls = cli("ls", "--label", f"oci.bundle={b}", json=True)
    assert ls.returncode == 0, ls.stderr
    rows = json.loads(ls.stdout)
    rows = rows["sandboxes"] if isinstance(rows, dict) else rows
    assert [s["id"] for s in rows] == [st["sandbox"]]
    assert rows[0]["labels"]["oci.id"] == "c1"
    # A second create of the same id is refused and leaves the first alone.
    cp = runc("create", "--bundle", b, "c1")
    assert cp.returncode == 1 and "container `c1` already exists" in cp.stderr

    runc("start", "c1", check=True)
    assert runc.state("c1")["status"] == "running"
    cp = runc("start", "c1")
    assert cp.returncode == 1 and "only a created container starts" in cp.stderr
    cp = runc("delete", "c1")
    assert cp.returncode == 1 and "is running" in cp.stderr

    runc("kill", "c1", "KILL", check=True)
    st = runc.wait_status("c1", "stopped")
    assert st["pid"] == 0
    # runc's words, which containerd's shim takes for "already finished" (the CRI kills
    # every process of a stopped container before deleting it).
    cp = runc("kill", "--all", "c1", "KILL")
    assert cp.returncode == 1 and "container not running" in cp.stderr, cp.stderr
    runc("delete", "c1", check=True)
    assert sandboxes(isolad, **{"oci.id": "c1"}) == []
    cp = runc("state", "c1")
    assert cp.returncode == 1 and "container `c1` does not exist" in cp.stderr


def cgroups_of(pid):
    """/proc/PID/cgroup as {controllers: path}."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return {ln.split(":", 2)[1]: ln.split(":", 2)[2] for ln in lines}


def test_relay_is_in_the_sandboxs_cgroups(runc, rootfs, tmp_path):
    """The relay (the pid an engine's shim reads /proc/PID/cgroup of for its stats) is in its
    sandbox's cgroups in every hierarchy the sandbox uses, with oom_score_adj -1000 (a cgroup
    OOM kills the container's processes, never it), and nowhere else of the sandbox's; its
    exit status stays the process's."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c",
                    "while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 7"])
    pidfile = tmp_path / "relay.pid"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "cg1", str(pidfile), str(tmp_path / "out")],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        st = runc.state("cg1")
        relay, init = int(pidfile.read_text()), st["pid"]
        mine, theirs = cgroups_of(relay), cgroups_of(init)
        own = {c: p for c, p in theirs.items() if p.endswith("/" + st["sandbox"])}
        assert "memory" in own and "pids" in own, theirs  # v1 here; "" on a v2 host
        assert all(mine[c] == p for c, p in own.items()), (mine, theirs)
        others = {c: p for c, p in mine.items() if c not in own}
        assert not any(st["sandbox"] in p for p in others.values()), mine
        # -1000 needs CAP_SYS_RESOURCE (which some container hosts withhold, this one among
        # them); without it the relay keeps the score of its parent, the shim (ours: the test's).
        caps = int(next(ln for ln in Path("/proc/self/status").read_text().splitlines()
                        if ln.startswith("CapEff:")).split()[1], 16)
        want = -1000 if caps & (1 << CAP_SYS_RESOURCE) else int(
            Path("/proc/self/oom_score_adj").read_text())
        assert int(Path(f"/proc/{relay}/oom_score_adj").read_text()) == want
        runc("start", "cg1", check=True)
        runc("exec", "cg1", "sh", "-c", ": > /tmp/go", check=True)
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "7", status
    runc("delete", "cg1", check=True)


def test_relay_without_room_for_its_stdin_forwarder(runc, rootfs, tmp_path):
    """The relay counts against the container's pids limit: when the container already filled
    it, the relay cannot fork its stdin forwarder and closes the process's stdin instead (a
    `cat` ends), rather than leave it open with nobody to write or close it."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "exec cat"])
    pidfile, out = tmp_path / "relay.pid", tmp_path / "out"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "np1", str(pidfile), str(out)],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        sb = runc.state("np1")["sandbox"]
        pids = next(p for p in (Path("/sys/fs/cgroup/pids/isola") / sb,  # v1, then v2
                                Path("/sys/fs/cgroup/isola") / sb) if p.is_dir())
        # Room for the container's process, none for the relay's forwarder.
        (pids / "pids.max").write_text(str(int((pids / "pids.current").read_text()) + 1))
        runc("start", "np1", check=True)
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "0", (status, Path(str(out) + ".err").read_text())
    assert "stdin is not forwarded" in Path(str(out) + ".err").read_text()
    runc("delete", "np1", check=True)


def test_kill_before_start_ends_the_relay_as_a_kill(runc, rootfs, tmp_path):
    """A container killed before `start`: its sandbox is destroyed with the relay in its
    cgroups, so the shim always reaps 137 (SIGKILL), as from a runc init killed unstarted."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    pidfile = tmp_path / "relay.pid"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "kb1", str(pidfile), str(tmp_path / "out")],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        runc("kill", "kb1", "TERM", check=True)
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "-9", status  # waitstatus_to_exitcode: killed by signal 9
    runc("delete", "kb1", check=True)


def test_hibernate_with_the_relay_in_the_sandboxs_cgroups(runc, rootfs, tmp_path, isolad):
    """Hibernating a container's sandbox ends its processes, the relay among them (it is in the
    sandbox's cgroups), and succeeds: the container is `stopped`, and delete removes it."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    pidfile = tmp_path / "relay.pid"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "hb1", str(pidfile), str(tmp_path / "out")],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        runc("start", "hb1", check=True)
        sb = runc.state("hb1")["sandbox"]
        c = isolad.client(timeout=120)
        r = c.request("POST", f"/v1/sandboxes/{sb}/hibernate")
        assert r.status == 200, r
        assert c.request("GET", f"/v1/sandboxes/{sb}").json()["state"] == "hibernated"
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "-9", status
    assert runc.state("hb1")["status"] == "stopped"
    runc("delete", "hb1", check=True)
    assert sandboxes(isolad, **{"oci.id": "hb1"}) == []


def test_relay_outlives_the_containers_oom(runc, rootfs, tmp_path, isolad):
    """A cgroup OOM in the container kills the container's process that filled it, never the
    relay that shares its cgroups: the shim still reaps the process's own status."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c",
                    "(a=x; while :; do a=$a$a; done); echo survived; exit 5"],
                    lambda c: c["linux"].update(resources={"memory": {"limit": 32 << 20}}))
    pidfile, out = tmp_path / "relay.pid", tmp_path / "out"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "oom1", str(pidfile), str(out)],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        runc("start", "oom1", check=True)
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "5" and out.read_text() == "survived\n", (status, out.read_text())
    sb = runc.state("oom1")["sandbox"]
    st = isolad.client(timeout=30).request("GET", f"/v1/sandboxes/{sb}/stats").json()
    assert st["oom_kills"] >= 1, st  # the subshell was what the OOM killer took
    runc("delete", "oom1", check=True)


def test_create_start_relays_output_to_creates_stdio(runc, rootfs, tmp_path):
    """The process's output reaches the stdout/stderr `create` was given (an engine's fifos)."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "echo out-line; echo err-line >&2"])
    out, err = tmp_path / "out", tmp_path / "err"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.run([str(RUNC), "--root", str(runc.root), "create", "--bundle", str(b),
                            "o1"], stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env,
                           timeout=120)
    assert p.returncode == 0, err.read_text()
    assert out.read_text() == ""  # nothing runs before start
    runc("start", "o1", check=True)
    runc.wait_status("o1", "stopped")  # only once the relay has written all of it
    assert (out.read_text(), err.read_text()) == ("out-line\n", "err-line\n")
    runc("delete", "o1", check=True)


def test_state_is_running_until_the_relay_has_written_the_output(runc, rootfs, tmp_path,
                                                                  isolad):
    """`state` says stopped only once the relay has written all of the process's output to
    create's stdout (runc's init writes its own, so it is there once runc says stopped): the
    runtime-tools suite reads its output file as soon as it sees stopped, and found it empty
    (its `mounts` test, docs/oci.md). Here a pipe nobody reads yet holds the relay after the
    process has ended."""
    line = "0123456789" * 4
    b = make_bundle(runc, rootfs, tmp_path, [
        "sh", "-c", f"i=0; while [ $i -lt 4000 ]; do echo {line}; i=$((i+1)); done"])
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    r, w = os.pipe()  # 64 KiB: the 164 kB of output fill it
    try:
        p = subprocess.run([str(RUNC), "--root", str(runc.root), "create", "--bundle", str(b),
                            "d1"], stdout=w, stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL, env=env, timeout=120)
        os.close(w)
        w = -1
        assert p.returncode == 0
        runc("start", "d1", check=True)
        sid = runc.state("d1")["sandbox"]
        pid = json.loads((runc.root / "d1" / "state.json").read_text())["pid"]
        c = isolad.client(timeout=30)
        end = time.monotonic() + 60
        while c.request("GET", f"/v1/sandboxes/{sid}/processes/{pid}").json()["running"]:
            assert time.monotonic() < end, "the process did not end"
            time.sleep(0.1)
        assert runc.state("d1")["status"] == "running"  # the relay has more to write
        with os.fdopen(r, "rb") as f:
            r = -1
            out = f.read()  # EOF: the relay has exited
        assert out == f"{line}\n".encode() * 4000, len(out)
        runc.wait_status("d1", "stopped")
        runc("delete", "d1", check=True)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)


def test_kill_before_start_stops_the_container(runc, rootfs, tmp_path, isolad):
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    runc("create", "--bundle", b, "k1", check=True)
    runc("kill", "k1", check=True)
    assert runc.state("k1")["status"] == "stopped"
    assert sandboxes(isolad, **{"oci.id": "k1"}) == []
    runc("delete", "k1", check=True)


def test_isola_hardening_holds_in_the_container(runc, rootfs, tmp_path):
    b = make_bundle(runc, rootfs, tmp_path,
                    ["grep", "-E", "^(NoNewPrivs|Seccomp|CapEff|CapBnd):", "/proc/self/status"],
                    # The spec asks for everything; isola's never-list still applies.
                    lambda c: c["process"].update(noNewPrivileges=False, capabilities={
                        k: ["CAP_SYS_ADMIN", "CAP_SYS_PTRACE"] for k in
                        ("bounding", "effective", "permitted")}))
    cp = runc("run", "--bundle", b, "h1")
    assert cp.returncode == 0, cp.stderr
    f = dict(line.split(":\t") for line in cp.stdout.splitlines())
    assert f["NoNewPrivs"] == "1"
    assert f["Seccomp"] == "2"  # filter mode: isola's allowlist
    assert not int(f["CapBnd"], 16) & (1 << CAP_SYS_ADMIN)
    assert not int(f["CapEff"], 16) & (1 << CAP_SYS_ADMIN)


def test_user_and_cwd_and_resources_are_mapped(runc, rootfs, tmp_path, isolad):
    def edit(c):
        c["process"]["user"] = {"uid": 1000, "gid": 1000}
        c["process"]["cwd"] = "/tmp"
        c["linux"]["resources"] = {"memory": {"limit": 64 << 20}, "pids": {"limit": 50},
                                   "cpu": {"quota": 50000, "period": 100000}}
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "id -u; echo $PWD"], edit)
    runc("create", "--bundle", b, "u1", check=True)
    sb = sandboxes(isolad, **{"oci.id": "u1"})[0]
    assert sb["memory"] == 64 << 20 and sb["pids"] == 50 and sb["cpu"] == 0.5
    runc("start", "u1", check=True)
    runc.wait_status("u1", "stopped")
    runc("delete", "u1", check=True)
    cp = runc("run", "--bundle", b, "u2")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "1000\n/tmp\n"


def test_network_allow_annotation_is_the_containers_egress_policy(runc, rootfs, tmp_path,
                                                                    isolad):
    """The annotation `isola.network.allow` (issue 19: a container's egress policy from its
    spec) becomes the sandbox's policy: default deny, those rules allowed; a rule isolad
    refuses fails create, naming it, and leaves nothing."""
    def edit(cfg):
        cfg["annotations"] = {"isola.network.allow": "allowed.test:443, 198.51.100.0/24"}

    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"], edit)
    runc("create", "--bundle", b, "na1", check=True)
    sid = runc.state("na1")["sandbox"]
    info = isolad.client().get_json(f"/v1/sandboxes/{sid}/network")
    pol = info["policy"]
    assert pol["default"] == "deny", pol
    assert [r.get("domain") or r.get("cidr") for r in pol["allow"]] == [
        "allowed.test", "198.51.100.0/24"], pol
    assert pol["allow"][0]["ports"] == [443], pol
    runc("delete", "--force", "na1", check=True)

    cfg = json.loads((b / "config.json").read_text())
    cfg["annotations"]["isola.network.allow"] = "not..a..name"
    (b / "config.json").write_text(json.dumps(cfg))
    cp = runc("create", "--bundle", b, "na2")
    assert cp.returncode == 1 and "not..a..name" in cp.stderr, cp.stderr
    assert sandboxes(isolad, **{"oci.id": "na2"}) == []
    assert not (runc.root / "na2").exists()


def test_an_isolad_restart_loses_no_container(rootfs, tmp_path):
    """Issue 19: a restart of isolad (here a kill -9) loses nothing: the running container is
    re-attached, its relay follows the output written after the restart into the stdout the
    engine gave `create`, and state, kill and delete work on it as before."""
    d = conftest.Isolad()
    try:
        r = Runc(d, tmp_path / "runc-root")
        b = make_bundle(r, rootfs, tmp_path,
                        ["sh", "-c", "echo before; while [ ! -e /tmp/go ]; do sleep 0.1; done; "
                         "echo after; exec sleep 1000"])
        out = tmp_path / "out"
        env = dict(os.environ, ISOLA_SOCKET=d.socket)
        with open(out, "wb") as f:
            subprocess.run([str(RUNC), "--root", str(r.root), "create", "--bundle", str(b),
                            "rs1"], stdout=f, stderr=f, stdin=subprocess.DEVNULL, env=env,
                           check=True, timeout=120)
        r("start", "rs1", check=True)
        ic.wait_for(lambda: b"before" in out.read_bytes(), 60, what="output before")
        sid = r.state("rs1")["sandbox"]
        d.restart(kill9=True)
        assert r.state("rs1")["status"] == "running"
        d.client().sh(sid, ": > /tmp/go")
        ic.wait_for(lambda: b"after" in out.read_bytes(), 60, what="output after the restart")
        assert out.read_bytes().count(b"before") == 1, out.read_bytes()
        r("kill", "rs1", "TERM", check=True)
        r.wait_status("rs1", "stopped")
        r("delete", "rs1", check=True)
        assert sandboxes(d, **{"oci.id": "rs1"}) == []
    finally:
        d.discard()


def test_an_image_without_etc_passwd_runs_as_its_uids(runc, tmp_path):
    """A FROM-scratch image has no /etc/passwd: runc runs the spec's numeric uid anyway, and
    so does isola-runc (it used to ask the agent for user `root` by name: "no such user")."""
    root = tmp_path / "scratch-rootfs"
    make_rootfs(root)
    (root / "etc" / "passwd").unlink()
    (root / "etc" / "group").unlink()
    b = make_bundle(runc, root, tmp_path, ["sh", "-c", "id -u"])
    cp = runc("run", "--bundle", b, "np0")
    assert cp.returncode == 0 and cp.stdout == "0\n", (cp.returncode, cp.stdout, cp.stderr)
    cfg = json.loads((b / "config.json").read_text())
    cfg["process"]["user"] = {"uid": 4242, "gid": 4242}
    (b / "config.json").write_text(json.dumps(cfg))
    cp = runc("run", "--bundle", b, "np1")
    assert cp.returncode == 0 and cp.stdout == "4242\n", (cp.returncode, cp.stdout, cp.stderr)


@pytest.mark.parametrize("edit,msg", [
    (lambda c: c.update(hooks={"createContainer": [{"path": "/bin/true"}]}),
     "`hooks.createContainer` is refused: it would run inside the container's namespaces"),
    # The host's (a path naming no container of isola-runc's): refused, never joined.
    (lambda c: c["linux"]["namespaces"].append({"type": "ipc", "path": "/proc/1/ns/ipc"}),
     "joining the ipc namespace at `/proc/1/ns/ipc` is refused: it names no container"),
    (lambda c: c["linux"]["namespaces"].append({"type": "uts", "path": "/proc/1/ns/uts"}),
     "joining the uts namespace at `/proc/1/ns/uts` is refused: it names no container"),
    (lambda c: c["linux"]["namespaces"].append({"type": "pid", "path": "/proc/1/ns/pid"}),
     "joining the pid namespace at `/proc/1/ns/pid` is refused"),
    (lambda c: c["linux"]["namespaces"].append({"type": "mount", "path": "/proc/1/ns/mnt"}),
     "joining the mount namespace at a path is refused"),
    # The host's own network (this test's, isolad's) needs isolad --allow-host-netns.
    (lambda c: c["linux"]["namespaces"].append({"type": "network", "path": HOST_NETNS}),
     f"network namespace `{HOST_NETNS}` is the host's: joining it needs isolad "
     "--allow-host-netns"),
    (lambda c: c["linux"]["namespaces"].append({"type": "network", "path": "/etc/passwd"}),
     "network namespace `/etc/passwd` is not a namespace file (nsfs)"),
    # A namespace file of another type, whatever its name says.
    (lambda c: c["linux"]["namespaces"].append({"type": "network",
                                                "path": f"/proc/{os.getpid()}/ns/ipc"}),
     f"`/proc/{os.getpid()}/ns/ipc` is a namespace but not a network namespace"),
    (lambda c: c["linux"]["namespaces"].append({"type": "network",
                                                "path": "/nonexistent/netns"}),
     "network namespace `/nonexistent/netns`: No such file or directory"),
    (lambda c: c["process"].update(terminal=True), "`process.terminal` needs --console-socket"),
    (lambda c: c["process"].update(args=[]), "`process.args` must be an array"),
    (lambda c: c.update(ociVersion="2.0.0"), "`ociVersion` must be a 1.x version"),
    (lambda c: c["root"].update(path="/nonexistent-oci-root"), "root.path"),
])
def test_refused_config_leaves_nothing(runc, rootfs, tmp_path, isolad, edit, msg):
    b = make_bundle(runc, rootfs, tmp_path, ["true"], edit)
    cp = runc("create", "--bundle", b, "bad")
    assert cp.returncode == 1 and msg in cp.stderr, cp.stderr
    assert not (runc.root / "bad").exists()
    assert sandboxes(isolad, **{"oci.id": "bad"}) == []


def test_namespaces_of_a_containers_relay(runc, rootfs, tmp_path, isolad):
    """The CRI's app containers (and Docker's `container:` modes) name another container by
    its engine pid, the relay: `/proc/RELAY/ns/{net,ipc,uts}` give that container's network,
    an ipc and uts namespace of the new container's own with its hostname; its pid namespace
    is refused naming it (docs/oci.md, "A pod's namespaces")."""
    def named(cfg):
        cfg["hostname"] = "pod-host"

    (tmp_path / "p").mkdir()
    b = make_bundle(runc, rootfs, tmp_path / "p", ["sleep", "1000"], named)
    pidfile = tmp_path / "pod.pid"
    runc("create", "--bundle", b, "--pid-file", pidfile, "pod", check=True)
    runc("start", "pod", check=True)
    relay = int(pidfile.read_text())

    def shared(*types):
        def edit(cfg):
            cfg["hostname"] = ""
            cfg["linux"]["namespaces"] = [{"type": t} for t in ("pid", "mount")] + \
                [{"type": t, "path": f"/proc/{relay}/ns/{t[:3] if t == 'network' else t}"}
                 for t in types]
        return edit

    (tmp_path / "a").mkdir()
    b = make_bundle(runc, rootfs, tmp_path / "a", ["cat", "/proc/sys/kernel/hostname"],
                    shared("network", "ipc", "uts"))
    cp = runc("run", "--keep", "--bundle", b, "app")
    assert (cp.returncode, cp.stdout) == (0, "pod-host\n"), cp.stderr
    # pod is on isola's own network (no path recorded): the path as given, which names the
    # namespace the relay entered, pod's.
    [pod] = sandboxes(isolad, **{"oci.id": "pod"})
    [app] = sandboxes(isolad, **{"oci.id": "app"})
    assert pod["network"] == {"mode": "own"}, pod
    assert app["network"] == {"mode": "joined", "path": f"/proc/{relay}/ns/net"}, app
    runc("delete", "--force", "app", check=True)

    (tmp_path / "q").mkdir()
    b = make_bundle(runc, rootfs, tmp_path / "q", ["true"], shared("network", "pid"))
    cp = runc("create", "--bundle", b, "sharedpid")
    assert cp.returncode == 1 and "joining the pid namespace of container `pod`" in \
        cp.stderr and "shareProcessNamespace" in cp.stderr, cp.stderr
    assert not (runc.root / "sharedpid").exists()
    assert sandboxes(isolad, **{"oci.id": "sharedpid"}) == []
    runc("delete", "--force", "pod", check=True)


def test_global_flags(runc, tmp_path):
    cp = runc("--systemd-cgroup", "state", "x")
    assert cp.returncode == 1 and "--systemd-cgroup is not supported" in cp.stderr
    log = tmp_path / "runc.log"
    cp = runc("--debug", "--log", log, "--log-format", "json", "state", "nosuch")
    assert cp.returncode == 1
    rec = json.loads(log.read_text().splitlines()[-1])
    assert rec["level"] == "error" and "container `nosuch` does not exist" in rec["msg"]
    feats = json.loads(runc("features", check=True).stdout)
    assert feats["ociVersionMin"].startswith("1.") and "pid" in feats["linux"]["namespaces"]
    cp = runc("create", "bad/id")
    assert cp.returncode == 1 and "container id `bad/id` is invalid" in cp.stderr
    for argv in (("bogus",), ("bogus", "x")):  # named as unknown, not as a missing container
        cp = runc(*argv)
        assert cp.returncode == 1 and "unknown command `bogus`" in cp.stderr, cp.stderr


def test_rootfs_is_the_operators_alone(isolad, rootfs):
    """A tenant (even its admin) naming a host directory as rootfs gets 403 and nothing."""
    t = Tenant(isolad, role="admin")
    try:
        r = t.client.request("POST", "/v1/sandboxes", json={"rootfs": str(rootfs)})
        assert r.status == 403, r
        assert t.client.request("GET", "/v1/sandboxes").json()["sandboxes"] == []
        # The operator's sandbox shows its init's host pid; the tenant never sees one.
        op = isolad.client(timeout=60)
        r = op.request("POST", "/v1/sandboxes", json={"rootfs": "relative/dir"})
        assert r.status == 400 and "must be an absolute path" in r.json()["message"], r
        r = op.request("POST", "/v1/sandboxes", json={"rootfs": str(rootfs / "etc/passwd")})
        assert r.status == 400 and "is not a directory" in r.json()["message"], r
    finally:
        t.cleanup()


def test_container_survives_isolad_restart(runc, rootfs, tmp_path, isolad):
    """isolad holds the container (label oci.id): a restart loses nothing."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "echo after restart"])
    runc("create", "--bundle", b, "s1", check=True)
    pid = runc.state("s1")["pid"]
    isolad.restart()
    st = runc.state("s1")
    assert st["status"] == "created" and st["pid"] == pid
    runc("start", "s1", check=True)
    runc.wait_status("s1", "stopped")
    runc("delete", "s1", check=True)


def test_exec_args_and_process_json(runc, rootfs, tmp_path):
    """runc exec: the args form (with -e, --cwd, --user) and --process; exit status kept."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    runc("create", "--bundle", b, "e1", check=True)
    runc("start", "e1", check=True)
    cp = runc("exec", "-e", "X=from-exec", "--cwd", "/tmp", "--user", "1000", "e1",
              "sh", "-c", "echo $X; id -u; echo $PWD; echo err >&2; exit 7")
    assert cp.returncode == 7, cp.stderr
    assert cp.stdout == "from-exec\n1000\n/tmp\n" and cp.stderr == "err\n"
    proc = tmp_path / "process.json"
    proc.write_text(json.dumps({"args": ["sh", "-c", "echo via-process-json; id -u"],
                                "env": ["PATH=/bin"], "cwd": "/", "user": {"uid": 0}}))
    cp = runc("exec", "--process", proc, "e1")
    assert cp.returncode == 0 and cp.stdout == "via-process-json\n0\n", cp.stderr
    # stdin reaches the exec'd process, EOF included.
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    p = subprocess.run([str(RUNC), "--root", str(runc.root), "exec", "e1", "cat"],
                       input=b"typed into stdin\n", capture_output=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout == b"typed into stdin\n", p.stderr
    # Bad input is named.
    cp = runc("exec", "e1")
    assert cp.returncode == 1 and "give a command after the container id" in cp.stderr
    cp = runc("exec", "--user", "bob", "e1", "true")
    assert cp.returncode == 1 and "--user `bob` must be UID[:GID]" in cp.stderr
    cp = runc("exec", "-t", "e1", "true")
    assert cp.returncode == 1 and "needs --console-socket" in cp.stderr
    runc("kill", "e1", "KILL", check=True)
    runc.wait_status("e1", "stopped")
    cp = runc("exec", "e1", "true")
    assert cp.returncode == 1 and "exec needs a running container" in cp.stderr


def test_exec_detached_pid_file_is_the_relay(runc, rootfs, tmp_path):
    """exec -d --pid-file: the pid file names a relay that holds exec's stdio and exits with
    the process's status (what containerd's shim reaps)."""
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"])
    runc("create", "--bundle", b, "d1", check=True)
    runc("start", "d1", check=True)
    pidfile, out = tmp_path / "exec.pid", tmp_path / "exec.out"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    with open(out, "wb") as o:
        p = subprocess.run([str(RUNC), "--root", str(runc.root), "exec", "-d", "--pid-file",
                            str(pidfile), "d1", "sh", "-c", "sleep 1; echo detached; exit 5"],
                           stdout=o, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    relay = int(pidfile.read_text())
    # Reap it the way a shim does: we are not its parent, so poll /proc until it is gone.
    end = time.monotonic() + 60
    while not process_gone(relay):
        assert time.monotonic() < end, "exec relay still running"
        time.sleep(0.1)
    assert out.read_text() == "detached\n"


def test_ps_pause_resume_events(runc, rootfs, tmp_path):
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"],
                    lambda c: c["linux"].update(resources={"memory": {"limit": 64 << 20}}))
    runc("create", "--bundle", b, "p1", check=True)
    runc("start", "p1", check=True)
    init = runc.state("p1")["pid"]
    # ps --format json: host pids, the init and the container's sleep among them.
    end = time.monotonic() + 60
    while True:
        pids = json.loads(runc("ps", "--format", "json", "p1", check=True).stdout)
        cmds = {p: Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0] for p in pids
                if Path(f"/proc/{p}").exists()}
        if init in pids and any(c.endswith(b"sleep") for c in cmds.values()):
            break
        assert time.monotonic() < end, (pids, cmds)
        time.sleep(0.1)
    table = runc("ps", "p1", check=True).stdout.splitlines()
    assert "PID" in table[0] and any("sleep 1000" in line for line in table[1:]), table
    col = table[0].split().index("PID")
    pids = set(json.loads(runc("ps", "--format", "json", "p1", check=True).stdout))
    assert all(int(line.split()[col]) in pids for line in table[1:]), table  # ours only

    # events --stats: one JSON object in runc's shape.
    ev = json.loads(runc("events", "--stats", "p1", check=True).stdout)
    assert ev["type"] == "stats" and ev["id"] == "p1"
    assert ev["data"]["memory"]["usage"]["limit"] == 64 << 20
    assert ev["data"]["memory"]["usage"]["usage"] > 0 and ev["data"]["pids"]["current"] >= 2
    assert ev["data"]["cpu"]["usage"]["total"] >= 0

    runc("pause", "p1", check=True)
    st = runc.state("p1")
    assert st["status"] == "paused" and st["pid"] == init
    assert init in json.loads(runc("ps", "--format", "json", "p1", check=True).stdout)
    cp = runc("pause", "p1")
    assert cp.returncode == 1 and "is paused: cannot pause it" in cp.stderr
    cp = runc("delete", "p1")
    assert cp.returncode == 1 and "is paused" in cp.stderr
    runc("resume", "p1", check=True)
    assert runc.state("p1")["status"] == "running"
    cp = runc("resume", "p1")
    assert cp.returncode == 1 and "is running: cannot resume it" in cp.stderr
    # events (streaming) ends when the container stops.
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    ev = subprocess.Popen([str(RUNC), "--root", str(runc.root), "events", "--interval",
                           "200ms", "p1"], stdout=subprocess.PIPE, env=env)
    first = json.loads(ev.stdout.readline())
    assert first["type"] == "stats" and first["id"] == "p1"
    runc("kill", "p1", "KILL", check=True)
    rest = ev.communicate(timeout=60)[0]
    assert ev.returncode == 0, rest
    cp = runc("events", "--stats", "p1")
    assert cp.returncode == 1 and "is not running" in cp.stderr
    assert json.loads(runc("ps", "--format", "json", "p1", check=True).stdout) == []


def recv_console(listener, deadline_s=60):
    """Accepts the runtime's connection on --console-socket and returns the pty master."""
    import socket
    listener.settimeout(deadline_s)
    conn, _ = listener.accept()
    with conn:
        msg, fds, _, _ = socket.recv_fds(conn, 1024, 1)
    assert len(fds) == 1 and msg.startswith(b"/dev/pts/"), (msg, fds)
    return fds[0]


def read_until(fd, want, deadline_s=60):
    import select
    buf, end = b"", time.monotonic() + deadline_s
    while want not in buf:
        left = end - time.monotonic()
        assert left > 0, buf
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            buf += chunk
    return buf


def test_terminal_through_console_socket(runc, rootfs, tmp_path):
    """process.terminal / exec -t: the engine gets a pty master over --console-socket; what it
    writes reaches the process, which sees a terminal of the engine's size."""
    import fcntl
    import socket
    import struct
    import termios
    b = make_bundle(runc, rootfs, tmp_path, ["sh"],
                    lambda c: c["process"].update(terminal=True))
    sock_path = str(tmp_path / "console.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(sock_path)
        listener.listen(1)
        runc("create", "--bundle", b, "--console-socket", sock_path, "t1", check=True)
        master = recv_console(listener)
        try:
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
            runc("start", "t1", check=True)
            os.write(master, b"test -t 0 && echo TTY-$((6*7))\n")
            assert b"TTY-42" in read_until(master, b"TTY-42")
            # The size the engine set on its master reaches the process's terminal.
            end = time.monotonic() + 60
            while True:
                os.write(master, b"stty size\n")
                out = read_until(master, b"33 111", 2)
                if b"33 111" in out:
                    break
                assert time.monotonic() < end, out
                time.sleep(0.2)

            cp = runc("exec", "-t", "-d", "--console-socket", sock_path, "t1", "sh", "-c",
                      "test -t 1 && echo EXEC-TTY")
            assert cp.returncode == 0, cp.stderr
            m2 = recv_console(listener)
            try:
                assert b"EXEC-TTY" in read_until(m2, b"EXEC-TTY")
            finally:
                os.close(m2)
            os.write(master, b"exit 9\n")
            runc.wait_status("t1", "stopped")
        finally:
            os.close(master)
    runc("delete", "t1", check=True)


SHIM = r"""
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, as containerd's shim
argv, pidfile, out = sys.argv[1:-2], sys.argv[-2], sys.argv[-1]
with open(out, "wb") as o, open(out + ".err", "w+b") as e:  # files: the relay keeps them
    cp = subprocess.run(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
    if cp.returncode:
        e.seek(0)
        sys.exit(f"create: {cp.returncode} {e.read()!r}")
print("created", flush=True)
pid = int(open(pidfile).read())
_, st = os.waitpid(pid, 0)  # the relay is ours to reap, as the shim's
print(os.waitstatus_to_exitcode(st), flush=True)
"""


def test_relay_outlives_isolad_restart(runc, rootfs, tmp_path, isolad):
    """A subreaper (a shim) reaps the relay named by --pid-file and gets the process's exit
    status, with all of its output once, although isolad restarted while it ran."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c",
                    "echo before; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo after; "
                    "exit 6"])
    pidfile, out = tmp_path / "relay.pid", tmp_path / "out"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    shim = subprocess.Popen(
        [sys.executable, "-c", SHIM, str(RUNC), "--root", str(runc.root), "create", "--bundle",
         str(b), "--pid-file", str(pidfile), "rr1", str(pidfile), str(out)],
        stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert shim.stdout.readline() == "created\n"
        runc("start", "rr1", check=True)
        end = time.monotonic() + 60
        while out.read_text() != "before\n":
            assert time.monotonic() < end, out.read_text()
            time.sleep(0.1)
        isolad.restart()
        assert runc.state("rr1")["status"] == "running"
        runc("exec", "rr1", "sh", "-c", ": > /tmp/go", check=True)
        status = shim.communicate(timeout=120)[0].strip()
    finally:
        if shim.poll() is None:
            shim.kill()
    assert status == "6" and out.read_text() == "before\nafter\n", (status, out.read_text())
    runc("delete", "rr1", check=True)


def test_relay_ends_when_the_state_dir_goes(runc, rootfs, tmp_path, isolad):
    """An engine that drops a created container without `delete` leaves no relay behind."""
    b = make_bundle(runc, rootfs, tmp_path, ["true"])
    pidfile = tmp_path / "relay.pid"
    runc("create", "--bundle", b, "--pid-file", pidfile, "g1", check=True)
    relay = int(pidfile.read_text())
    assert Path(f"/proc/{relay}").exists()
    sb = runc.state("g1")["sandbox"]
    assert isolad.client(timeout=60).request("DELETE", f"/v1/sandboxes/{sb}").status in (200, 204)
    shutil.rmtree(runc.root / "g1")
    end = time.monotonic() + 60
    while not process_gone(relay):
        assert time.monotonic() < end, "relay still waiting for a container that is gone"
        time.sleep(0.1)


def test_isola_socket_flag_wins_over_the_environment(runc, rootfs, tmp_path):
    """--isola-socket (Podman's --runtime-flag): isolad's socket without any environment."""
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "echo via-flag"])
    env = {"PATH": os.environ["PATH"], "ISOLA_SOCKET": "/nonexistent/isolad.sock"}
    p = subprocess.run([str(RUNC), "--root", str(runc.root), "--isola-socket",
                        runc.isolad.socket, "run", "--bundle", str(b), "f1"],
                       capture_output=True, text=True, env=env, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == "via-flag\n", p.stderr
    p = subprocess.run([str(RUNC), "--root", str(runc.root), "--isola-socket=/nonexistent/x.sock",
                        "create", "--bundle", str(b), "f2"], capture_output=True, text=True,
                       env=dict(os.environ, ISOLA_SOCKET=runc.isolad.socket), timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "/nonexistent/x.sock" in p.stderr, p.stderr


@pytest.fixture
def netns(tmp_path):
    """A network namespace made the way CNI and `ip netns` make them (a bind mount under
    /var/run/netns), holding a veth pair (both ends inside) with an address with an address and a TCP server on its own
    loopback that answers each connection with a token: only a process in this namespace can
    reach 127.0.0.1:PORT there and see that interface."""
    name = f"isola-t{os.getpid()}-{secrets.token_hex(3)}"
    token = secrets.token_hex(8)
    subprocess.run(["ip", "netns", "add", name], check=True)
    server = None
    try:
        ns = ["ip", "netns", "exec", name]
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "link", "add", "isolat0", "type", "veth", "peer", "name", "isolat1"],
                    ["ip", "addr", "add", "198.18.251.7/32", "dev", "isolat0"],
                    ["ip", "link", "set", "isolat0", "up"]):
            subprocess.run(ns + cmd, check=True)
        portfile = tmp_path / "netns-port"
        server = subprocess.Popen(ns + [sys.executable, "-c", (
            "import socket,sys\n"
            "s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(8)\n"
            f"open({str(portfile)!r},'w').write(str(s.getsockname()[1]))\n"
            "while True:\n"
            "    c,_=s.accept(); c.sendall(sys.argv[1].encode()+b'\\n'); c.close()\n"),
            token])
        end = time.monotonic() + 30
        while not portfile.exists() or not portfile.read_text():
            assert time.monotonic() < end and server.poll() is None, "netns server did not start"
            time.sleep(0.05)
        yield {"path": f"/var/run/netns/{name}", "port": int(portfile.read_text()),
               "token": token}
    finally:
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "delete", name], check=False)


def test_joins_the_network_namespace_at_a_path(runc, rootfs, tmp_path, isolad, netns):
    """Kubernetes' CNI netns, Docker's and Podman's networks: the spec names a network
    namespace path and the container's processes run in it (docs/oci.md)."""
    script = ("grep -c isolat0 /proc/net/dev; "
              f"exec 3<>/dev/tcp/127.0.0.1/{netns['port']} && read -r line <&3 && echo $line")
    b = make_bundle(runc, rootfs, tmp_path, ["bash", "-c", script],
                    lambda c: c["linux"]["namespaces"].append(
                        {"type": "network", "path": netns["path"]}))
    runc("create", "--bundle", b, "n1", check=True)
    sb = sandboxes(isolad, **{"oci.id": "n1"})[0]
    # Whose network it is, said by the sandbox itself (isola inspect shows the same JSON).
    assert sb["network"] == {"mode": "joined", "path": netns["path"]}, sb
    runc("delete", "--force", "n1", check=True)
    cp = runc("run", "--bundle", b, "n2")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == f"1\n{netns['token']}\n", cp.stdout
    # Without the path the container is on isola's own network: no such interface, and
    # nothing listens on its loopback.
    (tmp_path / "own").mkdir()
    b2 = make_bundle(runc, rootfs, tmp_path / "own", ["bash", "-c", script])
    cp = runc("run", "--bundle", b2, "n3")
    assert cp.returncode != 0 and cp.stdout == "0\n", (cp.stdout, cp.stderr)


def test_joining_a_network_namespace_is_the_operators_alone(isolad, netns):
    """A tenant (even its admin) naming a network namespace gets 403 and nothing; the
    operator gets its sandbox, and the combination with an egress policy is refused."""
    t = Tenant(isolad, role="admin")
    try:
        r = t.client.request("POST", "/v1/sandboxes", json={"netns": netns["path"]})
        assert r.status == 403 and r.json()["code"] == "forbidden", r
        assert "field `netns` names host paths" in r.json()["message"], r
        assert t.client.request("GET", "/v1/sandboxes").json()["sandboxes"] == []
    finally:
        t.cleanup()
    op = isolad.client(timeout=60)
    r = op.request("POST", "/v1/sandboxes", json={"netns": netns["path"],
                                                  "network": {"default": "deny"}})
    assert r.status == 400 and "cannot be combined" in r.json()["message"], r
    # A restore is a clone: its own name, network and mounts.
    for field, value in (("netns", netns["path"]), ("hostname", "h"),
                         ("binds", [{"source": "/usr", "destination": "/u"}])):
        r = op.request("POST", "/v1/sandboxes", json={"snapshot": "snap1", field: value})
        assert r.status == 400 and \
            f"field `{field}` cannot be combined with `snapshot`" in r.json()["message"], r
    r = op.request("POST", "/v1/sandboxes", json={"netns": "relative"})
    assert r.status == 400 and "must be an absolute path" in r.json()["message"], r
    # The process tier's alone: a microvm has its own kernel, network and mounts.
    for field, value in (("netns", netns["path"]), ("hostname", "vm-name"),
                         ("binds", [{"source": "/usr", "destination": "/u"}])):
        r = op.request("POST", "/v1/sandboxes", json={"tier": "microvm", field: value})
        assert r.status == 501 and "process tier" in r.json()["message"], (field, r)
    r = op.request("POST", "/v1/sandboxes", json={"netns": netns["path"]})
    assert r.status == 201, r
    sb = r.json()
    try:
        assert sb["network"] == {"mode": "joined", "path": netns["path"]}, sb
        # The engine's network: no isola policy to read or set, said as such.
        for method, body in (("GET", None), ("PUT", {"default": "deny"})):
            r = op.request(method, f"/v1/sandboxes/{sb['id']}/network", json=body)
            assert r.status == 501 and "egress policy does not apply" in r.json()["message"], r
    finally:
        op.request("DELETE", f"/v1/sandboxes/{sb['id']}")


def test_hostname_and_dev_mqueue(runc, rootfs, tmp_path, isolad):
    """The spec's hostname is the sandbox's (UTS namespace), and /dev/mqueue is an mqueue
    filesystem of the sandbox's own ipc namespace, as runc's default spec mounts it."""
    b = make_bundle(runc, rootfs, tmp_path,
                    ["sh", "-c", "cat /proc/sys/kernel/hostname; "
                                 "grep -c '^mqueue /dev/mqueue mqueue ' /proc/self/mounts"],
                    lambda c: c.update(hostname="Web-1.example"))
    runc("create", "--bundle", b, "h1", check=True)
    assert sandboxes(isolad, **{"oci.id": "h1"})[0]["hostname"] == "Web-1.example"
    runc("delete", "--force", "h1", check=True)
    cp = runc("run", "--bundle", b, "h2")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "Web-1.example\n1\n", cp.stdout
    # Without one, the hostname stays the sandbox's id.
    (tmp_path / "plain").mkdir()
    b2 = make_bundle(runc, rootfs, tmp_path / "plain", ["sleep", "1000"],
                     lambda c: c.pop("hostname", None))
    runc("create", "--bundle", b2, "h3", check=True)
    sb = sandboxes(isolad, **{"oci.id": "h3"})[0]
    assert sb["hostname"] == sb["id"], sb
    runc("delete", "--force", "h3", check=True)
    # A hostname the kernel would take but isola refuses names the field and the rule.
    op = isolad.client(timeout=60)
    for bad in ("-lead", "a b", "x" * 64, "under_score"):
        r = op.request("POST", "/v1/sandboxes", json={"hostname": bad})
        assert r.status == 400 and "hostname" in r.json()["message"], (bad, r)


def test_spec_binds_are_mounted(runc, rootfs, tmp_path, isolad):
    """docker -v, podman -v, Kubernetes volumes: the spec's bind mounts, read-only with `ro`;
    a writable one is written as the sandbox's own host uids, never host root; a file bind
    (an engine's /etc/hosts) on a target made in the writable layer; a bind on isola's own
    /dev is not applied and says so."""
    ro, rw = tmp_path / "ro-src", tmp_path / "rw-src"
    ro.mkdir()
    rw.mkdir()
    rw.chmod(0o777)
    (ro / "hello").write_text("from the host\n")
    hosts = tmp_path / "hosts"
    hosts.write_text("198.18.0.9 bound-host\n")
    script = ("cat /data/hello; (echo x > /data/new) 2>/dev/null && echo ro-written || "
              "echo ro-refused; echo written > /rw/out && id -u; cat /etc/hosts")

    def edit(c):
        c["mounts"] = c.get("mounts", []) + [
            {"destination": "/data", "type": "bind", "source": str(ro),
             "options": ["rbind", "ro"]},
            {"destination": "/rw", "type": "bind", "source": str(rw), "options": ["rbind", "rw"]},
            {"destination": "/etc/hosts", "type": "bind", "source": str(hosts),
             "options": ["bind"]},
            {"destination": "/dev/termination-log", "type": "bind", "source": str(hosts),
             "options": ["bind"]},
        ]
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", script], edit)
    cp = runc("run", "--bundle", b, "v1")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "from the host\nro-refused\n0\n198.18.0.9 bound-host\n", cp.stdout
    assert ("warning: mount `/dev/termination-log` (bind) not applied: isola keeps its own "
            "/proc, /sys and /dev") in cp.stderr, cp.stderr
    assert not (ro / "new").exists()
    out = rw / "out"
    assert out.read_text() == "written\n"
    # The container's root is the sandbox's first host uid, not host root (no idmap on a
    # writable bind: it cannot leave root-owned, setuid files in a host directory).
    assert out.stat().st_uid >= int(os.environ.get("ISOLA_TEST_UID_BASE") or 1), out.stat()
    # The file target was made in the sandbox's writable layer, not in the bundle's rootfs.
    assert not (rootfs / "etc" / "hosts").exists()
    # With --log the warning goes to the log, not to create's stderr (the container's).
    log = tmp_path / "runc.log"
    cp = runc("--log", log, "run", "--bundle", b, "v2")
    assert cp.returncode == 0 and "warning" not in cp.stderr, cp.stderr
    assert "/dev/termination-log" in log.read_text()


def mountinfo_line(out, mountpoint):
    """The /proc/self/mountinfo line (printed by the container into out) whose mount point is
    mountpoint, split into (mount options, filesystem type, super options)."""
    for line in out.splitlines():
        f = line.split()
        if len(f) > 6 and f[4] == mountpoint:
            rest = f[f.index("-") + 1:]
            return set(f[5].split(",")), rest[0], set(rest[2].split(","))
    raise AssertionError(f"no mount on {mountpoint} in:\n{out}")


def test_spec_tmpfs_masked_and_readonly_paths(runc, tmp_path, isolad):
    """The spec's tmpfs mounts (size, mode, always nosuid and nodev, noexec when asked), its
    linux.maskedPaths (a file reads empty, a directory is empty and read-only) and
    linux.readonlyPaths (refuses writes, still executes); a missing path is skipped; a
    symlink is resolved inside the root, never outside it; a bind below a tmpfs stays seen."""
    root = tmp_path / "rootfs"
    make_rootfs(root)
    (root / "etc" / "secret").write_text("s3cret\n")
    (root / "opt" / "hidden").mkdir(parents=True)
    (root / "opt" / "hidden" / "f").write_text("hidden\n")
    (root / "opt" / "tools").mkdir()
    (root / "opt" / "tools" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (root / "opt" / "tools" / "run.sh").chmod(0o755)
    (root / "etc" / "secret2").write_text("in-root\n")
    # Escapes that a resolution on the host would follow out of the root: `..` past the
    # root and an absolute target; resolved in the root they name its own /etc/secret2 and a
    # path the root lacks.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_text("host-file\n")
    (root / "esc").symlink_to("../../../../../../../../etc/secret2")
    (root / "abs").symlink_to(str(outside))
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "v").write_text("vol\n")
    script = ("cat /proc/self/mountinfo; echo ---; cat /etc/secret; echo .; "
              "cat /opt/hidden/f 2>/dev/null || echo hidden-empty; "
              "(touch /opt/hidden/x) 2>/dev/null || echo hidden-ro; /opt/tools/run.sh; "
              "(echo x > /opt/tools/new) 2>/dev/null || echo tools-ro; cat /etc/secret2; "
              "echo .; echo w > /scratch/f && cat /scratch/f; cat /scratch/vol/v; "
              "cat /proc/timer_list; echo .")

    def edit(c):
        c["mounts"] = c.get("mounts", []) + [
            {"destination": "/scratch", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "size=16m", "mode=1777"]},
            {"destination": "/scratch/vol", "type": "bind", "source": str(vol),
             "options": ["rbind", "ro"]},
            {"destination": "/nx", "type": "tmpfs", "source": "tmpfs",
             "options": ["noexec", "ro", "mode=700"]},
        ]
        c["linux"]["maskedPaths"] = ["/etc/secret", "/opt/hidden", "/nonexistent/x", "/esc",
                                     "/abs/file", "/proc/timer_list"]
        c["linux"]["readonlyPaths"] = ["/opt/tools", "/missing"]
        c["linux"]["resources"] = {"memory": {"limit": 128 << 20}}
    b = make_bundle(runc, root, tmp_path, ["sh", "-c", script], edit)
    cp = runc("run", "--bundle", b, "tm1")
    assert cp.returncode == 0, cp.stderr
    info, out = cp.stdout.split("---\n", 1)
    # mountinfo lists mounts in the order they were made: the spec's after isola's own
    # filesystems, in the spec's order (runtime-tools' "found in order").
    points = [line.split()[4] for line in info.splitlines()]
    order = [points.index(p) for p in ("/proc", "/dev", "/sys", "/scratch", "/scratch/vol")]
    assert order == sorted(order), points
    opts, fstype, sopts = mountinfo_line(info, "/scratch")
    assert fstype == "tmpfs" and {"nosuid", "nodev", "rw"} <= opts and "noexec" not in opts
    assert "size=16384k" in sopts, sopts  # mode 1777 is tmpfs's default: not listed
    opts, fstype, sopts = mountinfo_line(info, "/nx")
    # No size given: half the sandbox's memory limit, as /dev/shm.
    assert {"nosuid", "nodev", "noexec", "ro"} <= opts, opts
    assert {"size=65536k", "mode=700"} <= sopts, sopts
    assert out == ".\nhidden-empty\nhidden-ro\nran\ntools-ro\n.\nw\nvol\n.\n", out
    # Nothing outside the root was touched or covered.
    assert (outside / "file").read_text() == "host-file\n"
    assert not (root / "opt" / "tools" / "new").exists()
    assert sandboxes(isolad, **{"oci.id": "tm1"}) == []  # `run` deleted it


def test_spec_mounts_refused_naming_the_field(runc, rootfs, tmp_path):
    """Bad tmpfs options, masked and read-only paths in config.json fail `create` naming the
    field, and leave nothing."""
    for edit, msg in (
            (lambda c: c.update(mounts=[{"destination": "/t", "type": "tmpfs",
                                         "options": ["size=lots"]}]),
             "option `size=lots` must be size=N[kmgt]"),
            (lambda c: c["linux"].update(maskedPaths=["relative"]),
             "`linux.maskedPaths[0]` must be an absolute path"),
            (lambda c: c["linux"].update(readonlyPaths=["/a/../etc"]),
             "readonly_paths: `/a/../etc` must be an absolute path other than /"),
            (lambda c: c.update(mounts=[{"destination": "/t", "type": "tmpfs",
                                         "options": ["size=1g"]}],
                                linux=dict(c["linux"], resources={
                                    "memory": {"limit": 64 << 20}})),
             "tmpfs `/t`: size 1073741824 exceeds the sandbox's memory limit")):
        d = tmp_path / secrets.token_hex(4)
        d.mkdir()
        b = make_bundle(runc, rootfs, d, ["true"], edit)
        cp = runc("create", "--bundle", b, "bad1")
        assert cp.returncode != 0 and msg in cp.stderr, (msg, cp.stderr)
        assert not (runc.root / "bad1").exists()


def test_binds_are_the_operators_alone(isolad, tmp_path):
    """A tenant (even its admin) naming a host path to bind gets 403; the operator's binds
    are checked (no destination on isola's /proc, /sys, /dev; no symlinked source)."""
    src = tmp_path / "src"
    src.mkdir()
    t = Tenant(isolad, role="admin")
    try:
        r = t.client.request("POST", "/v1/sandboxes", json={
            "binds": [{"source": str(src), "destination": "/data"}]})
        assert r.status == 403 and r.json()["code"] == "forbidden", r
        assert "field `binds` names host paths" in r.json()["message"], r
        assert t.client.request("GET", "/v1/sandboxes").json()["sandboxes"] == []
    finally:
        t.cleanup()
    (tmp_path / "link").symlink_to(src)
    op = isolad.client(timeout=60)
    for bind, msg in (
            ({"source": str(src), "destination": "/proc/sys"},
             "destination `/proc/sys` is on isola's own /proc"),
            ({"source": str(src), "destination": "/dev"}, "is on isola's own /dev"),
            ({"source": str(src), "destination": "/"}, "must be an absolute path other than /"),
            ({"source": str(src), "destination": "/a/../etc"}, "without `.` or `..`"),
            ({"source": str(tmp_path / "link"), "destination": "/d"}, "a symlink is refused"),
            ({"source": str(tmp_path / "none"), "destination": "/d"},
             "No such file or directory"),
            ({"source": "relative", "destination": "/d"}, "must be an absolute path"),
            ({"destination": "/d"}, "must be an object with `source` and `destination`"),
            ({"source": str(src), "destination": "/d", "mode": "x"}, "unknown field `mode`")):
        r = op.request("POST", "/v1/sandboxes", json={"binds": [bind]})
        assert r.status == 400 and msg in r.json()["message"], (bind, r.json())


def test_joined_and_bound_container_survives_isolad_restart(runc, rootfs, tmp_path, isolad,
                                                            netns):
    """A restart re-attaches a container on a joined network with binds like any other: its
    JSON still says whose network it is, and what it runs after the restart is in that
    namespace, with the bind, and without any network of isola's."""
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "v").write_text("kept\n")
    script = ("cat /vol/v; grep -c isolat0 /proc/net/dev; "
              f"exec 3<>/dev/tcp/127.0.0.1/{netns['port']} && read -r line <&3 && echo $line")

    def edit(c):
        c["linux"]["namespaces"].append({"type": "network", "path": netns["path"]})
        c["mounts"] = c.get("mounts", []) + [
            {"destination": "/vol", "type": "bind", "source": str(vol), "options": ["ro"]}]
    b = make_bundle(runc, rootfs, tmp_path, ["bash", "-c", script], edit)
    out, err = tmp_path / "out", tmp_path / "err"
    env = dict(os.environ, ISOLA_SOCKET=runc.isolad.socket)
    with open(out, "wb") as o, open(err, "wb") as e:  # files: the relay keeps them
        p = subprocess.run([str(RUNC), "--root", str(runc.root), "create", "--bundle", str(b),
                            "j1"], stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env,
                           timeout=120)
    assert p.returncode == 0, err.read_text()
    isolad.restart()
    sb = sandboxes(isolad, **{"oci.id": "j1"})[0]
    assert sb["network"] == {"mode": "joined", "path": netns["path"]}, sb
    runc("start", "j1", check=True)
    runc.wait_status("j1", "stopped")
    end = time.monotonic() + 60
    while out.read_text() != f"kept\n1\n{netns['token']}\n":
        assert time.monotonic() < end, (out.read_text(), err.read_text())
        time.sleep(0.1)
    runc("delete", "j1", check=True)


def test_allow_host_netns_lets_the_operator_join_the_hosts_network(isolad):
    """`isolad --allow-host-netns` (Docker's `--network host`, an explicit ask): the operator's
    sandbox may then join the host's own network namespace: its processes are in it."""
    isolad.extra_args.append("--allow-host-netns")
    isolad.restart()
    op = isolad.client(timeout=60)
    try:
        r = op.request("POST", "/v1/sandboxes", json={"netns": HOST_NETNS})
        assert r.status == 201, r
        sid = r.json()["id"]
        try:
            seen = op.sh(sid, "readlink /proc/self/ns/net").strip()
            assert seen == os.readlink(HOST_NETNS), seen
        finally:
            op.delete_sandbox(sid)
    finally:
        isolad.extra_args.remove("--allow-host-netns")
        isolad.restart()
    r = isolad.client(timeout=60).request("POST", "/v1/sandboxes", json={"netns": HOST_NETNS})
    assert r.status == 403 and "--allow-host-netns" in r.json()["message"], r


def test_joined_network_cannot_be_reconfigured_from_inside(isolad, netns):
    """The joined namespace stays owned by the host's user namespace: the sandbox's root holds
    no CAP_NET_ADMIN over it, so the engine's network is not the container's to change.
    Judged from the host."""
    name = netns["path"].rsplit("/", 1)[1]
    op = isolad.client(timeout=60)
    r = op.request("POST", "/v1/sandboxes", json={"netns": netns["path"]})
    assert r.status == 201, r
    sid = r.json()["id"]
    try:
        out = op.sh(sid, "ip link set isolat0 down 2>&1; ip addr add 198.18.251.9/32 dev lo "
                         "2>&1; echo done")
        # The kernel's answer (RTNETLINK), not the filter's: no capability over the namespace.
        assert out == "RTNETLINK answers: Operation not permitted\n" * 2 + "done\n", out
    finally:
        op.delete_sandbox(sid)
    show = subprocess.run(["ip", "netns", "exec", name, "ip", "-o", "addr", "show"],
                          capture_output=True, text=True, check=True).stdout
    assert "198.18.251.7/32" in show and "198.18.251.9" not in show, show
    link = subprocess.run(["ip", "netns", "exec", name, "ip", "-o", "link", "show", "isolat0"],
                          capture_output=True, text=True, check=True).stdout
    assert "UP" in link.split(">")[0], link


def test_spec_seccomp_profile(runc, rootfs, tmp_path):
    """linux.seccomp: the spec's profile is stacked on isola's filter for the container's
    process and its execs (two filters; mkdir fails with the profile's EPERM); a bad one
    fails `create` naming it and leaves nothing."""
    prof = {"defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                          "errnoRet": 1}]}
    probe = ("grep Seccomp_filters /proc/self/status; mkdir /tmp/d 2>&1 | "
             "grep -c 'Operation not permitted'")
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"],
                    lambda c: c["linux"].update(seccomp=prof))
    runc("create", "--bundle", b, "sc1", check=True)
    runc("start", "sc1", check=True)
    cp = runc("exec", "sc1", "sh", "-c", probe)
    assert cp.stdout == "Seccomp_filters:\t2\n1\n", (cp.stdout, cp.stderr)
    runc("kill", "sc1", "KILL", check=True)
    runc.wait_status("sc1", "stopped")
    d = tmp_path / "bad"
    d.mkdir()
    b = make_bundle(runc, rootfs, d, ["true"], lambda c: c["linux"].update(
        seccomp={"defaultAction": "SCMP_ACT_NOTIFY", "listenerPath": ""}))
    cp = runc("create", "--bundle", b, "bad1")
    assert cp.returncode != 0 and "action SCMP_ACT_NOTIFY is not supported" in cp.stderr, \
        cp.stderr
    assert not (runc.root / "bad1").exists()
