# SPDX-License-Identifier: Apache-2.0
"""isola-runc under a real Docker engine (docs/oci.md, issue 19): the test starts its own
dockerd (Debian's docker.io: its own --data-root, --exec-root, --pidfile and unix socket under a
temp dir, no iptables, no bridge, `--add-runtime isola=<build>/isola-runc`, talking to the
session's isolad through $ISOLA_SOCKET), imports a small image built from host binaries
(`docker import` of a rootfs tar: no registry), and drives `docker run/exec/logs/top/pause/
stop/rm` with `--runtime isola`. Every container is a process-tier sandbox of that isolad."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_oci_runtime import RUNC, make_rootfs, remove_engine_dir, sandboxes  # noqa: E402

IMAGE = "isola-oci-test:1"
EXTRA_BINARIES = ("true", "echo", "test", "readlink")


class Dockerd:
    """A private dockerd; stopped by its pid file, its dirs removed. With netns (the name of a
    namespace the caller made with `ip netns add`), dockerd runs in that network namespace with
    Docker's default networking (the bridge, iptables, docker-proxy): all of it stays there."""

    def __init__(self, isolad, isola_runc, netns=None):
        dockerd = shutil.which("dockerd")
        if not dockerd:
            pytest.fail("dockerd is missing: scripts/deps.sh installs docker.io", pytrace=False)
        # Short paths: containerd's sockets live under the exec root (108-byte sun_path).
        self.dir = Path(tempfile.mkdtemp(prefix="isola-dk-", dir="/tmp"))
        self.sock = self.dir / "docker.sock"
        self.pidfile = self.dir / "dockerd.pid"
        self.log = self.dir / "dockerd.log"
        # docker.io's own client (a newer one in /usr/local/bin may sit first on PATH).
        self.client = "/usr/bin/docker"
        env = dict(os.environ, ISOLA_SOCKET=isolad.socket)
        env.pop("ISOLA_URL", None)
        env.pop("ISOLA_TOKEN", None)
        # nsenter (not `ip netns exec`): only the network namespace changes, so the
        # runtime's mounts (isola-runc's ROOT/ID/netns) are in the host's mount namespace,
        # where isolad opens them.
        net = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
        nonet = [] if netns else ["--iptables=false", "--ip6tables=false", "--bridge=none",
                                  "--userland-proxy=false"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                net + [dockerd, "--data-root", str(self.dir / "data"), "--exec-root",
                       str(self.dir / "exec"), "--pidfile", str(self.pidfile), "-H",
                       f"unix://{self.sock}"] + nonet +
                ["--storage-driver=vfs", "--add-runtime", f"isola={isola_runc}"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        end = time.monotonic() + 90
        while self("version", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                pytest.fail(f"dockerd did not start:\n{self.log.read_text()[-3000:]}",
                            pytrace=False)
            time.sleep(0.2)

    def __call__(self, *args, input=None, check=True, timeout=120):
        argv = [self.client, "-H", f"unix://{self.sock}"] + [str(a) for a in args]
        try:
            cp = subprocess.run(argv, input=input, capture_output=True, text=True,
                                timeout=timeout)
        except subprocess.TimeoutExpired:
            # The evidence a hang needs (seen once in CI: `docker run --security-opt
            # seccomp=...` with its sandbox created and nothing after): where the containers
            # stand and what dockerd and containerd said.
            ps = subprocess.run(argv[:3] + ["ps", "-a", "--no-trunc"], capture_output=True,
                                text=True, timeout=30)
            pytest.fail(f"docker {args}: no answer in {timeout} s\n`docker ps -a`:\n"
                        f"{ps.stdout}{ps.stderr}\ndockerd.log (end):\n"
                        f"{self.log.read_text(errors='replace')[-4000:]}", pytrace=False)
        if check:
            assert cp.returncode == 0, f"docker {args}: {cp.returncode}\n{cp.stderr}"
        return cp

    def stop(self):
        if self.proc.poll() is None:
            for cid in self("ps", "-aq", check=False).stdout.split():
                self("rm", "-f", cid, check=False)
        pid = int(self.pidfile.read_text()) if self.pidfile.exists() else self.proc.pid
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        # dockerd may leave a netns bind mount under its exec root (netns/default): only
        # mounts under our own dir are undone, deepest first.
        remove_engine_dir(self.dir)


def import_image(d, tmp_path_factory, extra=()):
    """IMAGE in dockerd d: test_oci_runtime's rootfs, EXTRA_BINARIES and the files `extra`
    (host paths, into /bin), imported from a tar (no registry)."""
    root = tmp_path_factory.mktemp("oci-docker-image") / "rootfs"
    make_rootfs(root)
    for name in EXTRA_BINARIES:
        src = shutil.which(name)
        if src:
            shutil.copy2(os.path.realpath(src), root / "bin" / name)
    for path in extra:
        shutil.copy2(path, root / "bin" / Path(path).name)
    tar = root.parent / "rootfs.tar"
    with tarfile.open(tar, "w") as t:
        t.add(root, arcname=".")
    d("import", tar, IMAGE)


@pytest.fixture(scope="module")
def docker(isolad, tmp_path_factory):
    d = Dockerd(isolad, RUNC)
    try:
        import_image(d, tmp_path_factory)
        yield d
    finally:
        d.stop()


def sandbox_of(isolad, cid):
    sbs = sandboxes(isolad, **{"oci.id": cid})
    assert len(sbs) == 1, sbs
    return sbs[0]


def poll(fn, what, deadline_s=60):
    end = time.monotonic() + deadline_s
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < end, what
        time.sleep(0.1)


def test_docker_run_echo_and_exit_status(docker):
    cp = docker("run", "--rm", "--runtime", "isola", IMAGE, "echo", "hi")
    assert cp.stdout == "hi\n", cp.stderr
    cp = docker("run", "--rm", "--runtime", "isola", IMAGE, "sh", "-c", "exit 4", check=False)
    assert cp.returncode == 4, cp.stderr
    # stdin (-i) reaches the container's process, and its EOF too.
    cp = docker("run", "--rm", "-i", "--runtime", "isola", IMAGE, "cat", input="piped-in\n")
    assert cp.stdout == "piped-in\n", cp.stderr


def test_docker_terminal(docker):
    """-t: isola-runc hands the engine a pty through --console-socket (run and exec)."""
    cp = docker("run", "--rm", "-t", "--runtime", "isola", IMAGE, "sh", "-c",
                "test -t 0 && test -t 1 && echo tty-yes")
    assert cp.stdout.replace("\r", "") == "tty-yes\n", cp.stderr
    cp = docker("run", "-d", "--name", "tty1", "--runtime", "isola", IMAGE, "sleep", "1000")
    try:
        cp = docker("exec", "-t", "tty1", "sh", "-c", "test -t 1 && echo exec-tty")
        assert cp.stdout.replace("\r", "") == "exec-tty\n", cp.stderr
    finally:
        docker("rm", "-f", "tty1", check=False)


def test_docker_exec_logs_top_pause_stop(docker, isolad):
    cid = docker("run", "-d", "--name", "life1", "--runtime", "isola", "--memory", "64m",
                 "--user", "1000", IMAGE, "sh", "-c",
                 "echo started; echo to-stderr >&2; exec sleep 1000").stdout.strip()
    try:
        # The container is an isola sandbox with the engine's limits mapped.
        sb = sandbox_of(isolad, cid)
        assert sb["memory"] == 64 << 20 and sb["labels"]["oci.id"] == cid
        poll(lambda: "started" in docker("logs", "life1").stdout, "logs: no `started`")
        logs = docker("logs", "life1")
        assert logs.stdout == "started\n" and logs.stderr == "to-stderr\n"

        cp = docker("exec", "life1", "sh", "-c", "id -u; echo exec-ok")
        assert cp.stdout == "1000\nexec-ok\n", cp.stderr
        cp = docker("exec", "-u", "0", "life1", "sh", "-c", "id -u")
        assert cp.stdout == "0\n", cp.stderr
        cp = docker("exec", "-i", "life1", "cat", input="exec-stdin\n")
        assert cp.stdout == "exec-stdin\n", cp.stderr
        cp = docker("exec", "life1", "sh", "-c", "exit 3", check=False)
        assert cp.returncode == 3, cp.stderr

        top = poll(lambda: [line for line in docker("top", "life1").stdout.splitlines()
                            if "sleep 1000" in line], "top: no `sleep 1000`")
        assert top

        docker("pause", "life1")
        assert docker("inspect", "-f", "{{.State.Status}}", "life1").stdout.strip() == "paused"
        assert sandbox_of(isolad, cid)["state"] == "paused"
        docker("unpause", "life1")
        assert sandbox_of(isolad, cid)["state"] == "running"

        docker("stop", "-t", "10", "life1")
        st = json.loads(docker("inspect", "-f", "{{json .State}}", "life1").stdout)
        assert st["Status"] == "exited" and st["ExitCode"] == 143, st  # TERM
    finally:
        docker("rm", "-f", "life1", check=False)
    poll(lambda: sandboxes(isolad, **{"oci.id": cid}) == [], "sandbox left after docker rm")


def test_docker_kill_reports_the_signal(docker):
    docker("run", "-d", "--name", "kill1", "--runtime", "isola", IMAGE, "sleep", "1000")
    try:
        docker("kill", "kill1")
        code = poll(lambda: (s := json.loads(docker("inspect", "-f", "{{json .State}}",
                                                    "kill1").stdout))["Status"] == "exited"
                    and s["ExitCode"], "kill1 still running")
        assert code == 137
    finally:
        docker("rm", "-f", "kill1", check=False)


def test_docker_volumes_and_hostname(docker, isolad, tmp_path):
    """`docker run -v` (read-only and read-write binds) and `--hostname`; Docker's own
    /etc/hosts and /etc/hostname binds are files it made for the container."""
    vol, out = tmp_path / "vol", tmp_path / "out"
    vol.mkdir()
    out.mkdir()
    out.chmod(0o777)
    (vol / "f").write_text("vol-data\n")
    cp = docker("run", "--rm", "--runtime", "isola", "--hostname", "dk-host", "-v",
                f"{vol}:/data:ro", "-v", f"{out}:/out", IMAGE, "sh", "-c",
                "cat /data/f; cat /proc/sys/kernel/hostname /etc/hostname; "
                "grep -q localhost /etc/hosts && echo hosts; "
                "(echo no > /data/g) 2>/dev/null || echo ro; echo w > /out/x")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "vol-data\ndk-host\ndk-host\nhosts\nro\n", cp.stdout
    assert (out / "x").read_text() == "w\n" and (out / "x").stat().st_uid != 0
    assert not (vol / "g").exists()


def test_docker_tmpfs(docker):
    """`docker run --tmpfs /scratch:size=16m`: a tmpfs of that size, nosuid and nodev, that the
    container writes; Docker's default masked and read-only paths hold (/proc/timer_list reads
    empty, /proc/sys refuses writes)."""
    cp = docker("run", "--rm", "--runtime", "isola", "--tmpfs", "/scratch:size=16m,noexec",
                IMAGE, "sh", "-c",
                "grep ' /scratch ' /proc/self/mountinfo; echo x > /scratch/f && cat /scratch/f; "
                "cat /proc/timer_list; echo .; (echo 1 > /proc/sys/kernel/ns_last_pid) 2>/dev/null "
                "|| echo sys-ro")
    assert cp.returncode == 0, cp.stderr
    line, rest = cp.stdout.split("\n", 1)
    opts = line.split()[5].split(",")
    assert " tmpfs tmpfs " in line and "size=16384k" in line, line
    assert {"nosuid", "nodev", "noexec"} <= set(opts), line
    assert rest == "x\n.\nsys-ro\n", cp.stdout


def test_docker_seccomp_profiles(docker, tmp_path):
    """Docker sends its default seccomp profile in every config.json: isolad compiles it and
    the container runs under it on top of isola's filter (two filters). A profile of one's own
    (`--security-opt seccomp=FILE`) narrows further: mkdir fails with its EPERM."""
    probe = ("grep Seccomp_filters /proc/self/status; mkdir /tmp/d 2>&1 | "
             "grep -c 'Operation not permitted'")
    cp = docker("run", "--rm", "--runtime", "isola", IMAGE, "sh", "-c", probe, check=False)
    assert cp.stdout == "Seccomp_filters:\t2\n0\n", (cp.stdout, cp.stderr)
    prof = tmp_path / "deny-mkdir.json"
    prof.write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO",
                      "errnoRet": 1}]}))
    cp = docker("run", "--rm", "--runtime", "isola", "--security-opt", f"seccomp={prof}",
                IMAGE, "sh", "-c", probe, check=False)
    assert cp.stdout == "Seccomp_filters:\t2\n1\n", (cp.stdout, cp.stderr)
    # unconfined: no profile in the spec, isola's filter alone.
    cp = docker("run", "--rm", "--runtime", "isola", "--security-opt", "seccomp=unconfined",
                IMAGE, "sh", "-c", probe, check=False)
    assert cp.stdout == "Seccomp_filters:\t1\n0\n", (cp.stdout, cp.stderr)


def test_docker_read_only_group_add_ulimit_oom_score_adj(docker):
    """`docker run --read-only --tmpfs /tmp --group-add 10 --ulimit nofile=64:128
    --oom-score-adj 500`: the root refuses writes (the tmpfs and /dev/shm do not), the group is
    in `id -G`, the limits and the score are the process's; a --ulimit above isola's 1024 is
    lowered to it (isola-runc's `rlimits_cap`, docs/oci.md)."""
    cp = docker("run", "--rm", "--runtime", "isola", "--read-only", "--tmpfs", "/tmp",
                "--group-add", "10", "--ulimit", "nofile=64:128", "--oom-score-adj", "500",
                IMAGE, "sh", "-c",
                "(echo x > /x) 2>/dev/null || echo root-ro; echo t > /tmp/t && cat /tmp/t; "
                "echo s > /dev/shm/s && cat /dev/shm/s; id -G; ulimit -Sn; ulimit -Hn; "
                "cat /proc/self/oom_score_adj")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.split("\n")
    assert lines[:3] == ["root-ro", "t", "s"] and "10" in lines[3].split(), cp.stdout
    assert lines[4:7] == ["64", "128", "500"], cp.stdout
    cp = docker("run", "--rm", "--runtime", "isola", "--ulimit", "nofile=2048:4096", IMAGE,
                "sh", "-c", "ulimit -Sn; ulimit -Hn")
    assert cp.stdout == "1024\n1024\n", cp.stdout


def test_docker_network_container_mode(docker, isolad):
    """`--network container:X` joins X's network namespace: Docker names it by X's
    `.State.Pid`, the relay, which lives in X's sandbox's network namespace (docs/oci.md)."""
    name = f"netx-{os.getpid()}"
    docker("run", "-d", "--runtime", "isola", "--name", name, IMAGE, "sleep", "1000")
    try:
        want = docker("exec", name, "readlink", "/proc/self/ns/net").stdout
        assert want.startswith("net:["), want
        cp = docker("run", "--rm", "--runtime", "isola", "--network", f"container:{name}",
                    IMAGE, "readlink", "/proc/self/ns/net")
        assert cp.stdout == want, (cp.stdout, want, cp.stderr)
        # A container of its own network is elsewhere.
        assert docker("run", "--rm", "--runtime", "isola", IMAGE, "readlink",
                      "/proc/self/ns/net").stdout != want
    finally:
        docker("rm", "-f", name, check=False)


def mib(text):
    """Docker's human size (`1.5MiB`, `64MiB`, `700KiB`, `1.2GiB`, `0B`) in MiB."""
    units = {"B": 1 / (1 << 20), "KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1 << 20}
    for u in sorted(units, key=len, reverse=True):
        if text.endswith(u):
            return float(text[:-len(u)]) * units[u]
    raise AssertionError(f"not a size: {text!r}")


def test_docker_stats_are_the_containers(docker, isolad):
    """`docker stats` reads the cgroups of the pid isola-runc gave the shim (the relay), which
    joined its sandbox's: the 64 MiB limit and the container's own small usage and pids, not
    the engine's cgroup (no limit, hundreds of MiB, every process of the engine)."""
    name = f"stats-{os.getpid()}"
    cid = docker("run", "-d", "--name", name, "--runtime", "isola", "--memory", "64m", IMAGE,
                 "sleep", "1000").stdout.strip()
    try:
        sb = sandbox_of(isolad, cid)
        row = poll(lambda: json.loads(docker("stats", "--no-stream", "--format", "{{json .}}",
                                             name).stdout or "null"), "no stats row")
        used, limit = (mib(x.strip()) for x in row["MemUsage"].split("/"))
        assert limit == 64, row
        assert 0 < used < 64, row
        # The sandbox's init, sleep, and the relay (with its stdin forwarder): a handful.
        assert 2 <= int(row["PIDs"]) <= 8, row
        st = isolad.client(timeout=30).request("GET", f"/v1/sandboxes/{sb['id']}/stats").json()
        assert st["memory_limit_bytes"] == 64 << 20 and st["pids"] >= 2, st
    finally:
        docker("rm", "-f", name, check=False)
    poll(lambda: sandboxes(isolad, **{"oci.id": cid}) == [], "sandbox left after docker rm")
