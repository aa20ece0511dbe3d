# SPDX-License-Identifier: Apache-2.0
"""isola-runc under Podman (docs/oci.md, issue 19): Debian's podman 4.3 with its own --root,
--runroot and --tmpdir under a temp dir (vfs, cgroupfs, file events), `--runtime
<build>/isola-runc --runtime-flag isola-socket=<the session isolad's socket>` (conmon passes
the runtime no environment), an image imported from a rootfs tar, `--network none`."""

import json
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_oci_runtime  # noqa: E402
from tenancy_util import ROOT_CONFTEST as conftest  # noqa: E402
from test_oci_runtime import RUNC, make_rootfs, remove_engine_dir, sandboxes  # noqa: E402

netns = test_oci_runtime.netns  # the fixture: a network namespace with a server in it

IMAGE = "localhost/isola-oci-test:1"
# A pod's infra image: Podman builds its own from catatonit (not installed here) unless told one.
PAUSE = "localhost/isola-oci-pause:1"


class Podman:
    def __init__(self, isolad):
        self.bin = shutil.which("podman")
        if not self.bin:
            pytest.fail("podman is missing: scripts/deps.sh installs it", pytrace=False)
        self.dir = Path(tempfile.mkdtemp(prefix="isola-pm-", dir="/tmp"))
        self.base = [self.bin, "--root", str(self.dir / "root"), "--runroot",
                     str(self.dir / "run"), "--tmpdir", str(self.dir / "tmp"),
                     "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                     "--storage-driver", "vfs", "--runtime", str(RUNC),
                     "--runtime-flag", f"isola-socket={isolad.socket}"]

    def __call__(self, *args, input=None, check=True, timeout=120):
        cp = subprocess.run(self.base + [str(a) for a in args], input=input,
                            capture_output=True, text=True, timeout=timeout,
                            stdin=None if input is not None else subprocess.DEVNULL)
        if check:
            assert cp.returncode == 0, f"podman {args}: {cp.returncode}\n{cp.stderr}"
        return cp

    def cleanup(self):
        self("pod", "rm", "-af", "-t", "0", check=False)
        self("rm", "-af", "-t", "0", check=False)
        remove_engine_dir(self.dir)


@pytest.fixture(scope="module")
def podman(isolad, tmp_path_factory):
    p = Podman(isolad)
    try:
        root = tmp_path_factory.mktemp("oci-podman-image") / "rootfs"
        make_rootfs(root, extra=("perl",))  # perl: a TCP server from its builtins alone
        tar = root.parent / "rootfs.tar"
        with tarfile.open(tar, "w") as t:
            t.add(root, arcname=".")
        p("import", tar, IMAGE)
        p("import", "--change", 'CMD ["sleep", "1000000"]', tar, PAUSE)
        yield p
    finally:
        p.cleanup()


def test_podman_run_exec_logs_stop(podman, isolad):
    cp = podman("run", "--rm", "--network", "none", IMAGE, "sh", "-c", "echo podman-hi; exit 3",
                check=False)
    assert cp.returncode == 3 and cp.stdout == "podman-hi\n", cp.stderr
    cp = podman("run", "--rm", "-i", "--network", "none", IMAGE, "cat", input="piped-in\n")
    assert cp.stdout == "piped-in\n", cp.stderr
    cp = podman("run", "--rm", "-t", "--network", "none", IMAGE, "sh", "-c",
                "test -t 1 && echo tty-yes")
    assert cp.stdout.replace("\r", "") == "tty-yes\n", cp.stderr

    cid = podman("run", "-d", "--name", "pm1", "--network", "none", "--memory", "64m", IMAGE,
                 "sh", "-c", "echo logged; exec sleep 1000").stdout.strip()
    try:
        sbs = sandboxes(isolad, **{"oci.id": cid})
        assert len(sbs) == 1 and sbs[0]["memory"] == 64 << 20, sbs
        cp = podman("exec", "pm1", "sh", "-c", "echo exec-ok; exit 5", check=False)
        assert cp.returncode == 5 and cp.stdout == "exec-ok\n", cp.stderr
        end = time.monotonic() + 60
        while podman("logs", "pm1").stdout != "logged\n":
            assert time.monotonic() < end, podman("logs", "pm1").stdout
            time.sleep(0.1)
        podman("stop", "-t", "10", "pm1")
        code = podman("inspect", "-f", "{{.State.ExitCode}}", "pm1").stdout.strip()
        assert code == "143", code
    finally:
        podman("rm", "-f", "pm1", check=False)
    end = time.monotonic() + 60
    while sandboxes(isolad, **{"oci.id": cid}):
        assert time.monotonic() < end, "sandbox left after podman rm"
        time.sleep(0.1)


def test_podman_network_ns_path_and_volume(podman, netns, tmp_path):
    """`--network ns:PATH` (the runtime gets that namespace path, as with Podman's own
    networks) and `-v`: the container runs in that network with the volume."""
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "v").write_text("pm-vol\n")
    script = ("cat /vol/v; grep -c isolat0 /proc/net/dev; "
              f"exec 3<>/dev/tcp/127.0.0.1/{netns['port']} && read -r line <&3 && echo $line")
    cp = podman("run", "--rm", "--network", f"ns:{netns['path']}", "-v", f"{vol}:/vol:ro",
                IMAGE, "bash", "-c", script)
    assert cp.stdout == f"pm-vol\n1\n{netns['token']}\n", (cp.stdout, cp.stderr)


def size_bytes(text):
    """Podman's human size (SI: `966.7kB`, `67.11MB`, `0B`) in bytes."""
    units = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
    for u in sorted(units, key=len, reverse=True):
        if text.endswith(u):
            return float(text[:-len(u)]) * units[u]
    raise AssertionError(f"not a size: {text!r}")


def test_podman_stats_are_the_containers(podman, isolad):
    """`podman stats` reads the cgroups of the pid `isola-runc state` reports (Podman takes
    its container's pid from the runtime's `state`: the sandbox's init, not the relay), the
    longest path of /proc/PID/cgroup: the sandbox's `isola/<id>`, so the numbers are the
    container's (its 64 MiB limit, its few pids)."""
    cid = podman("run", "-d", "--name", "pmstats", "--network", "none", "--memory", "64m",
                 IMAGE, "sleep", "1000").stdout.strip()
    try:
        row = json.loads(podman("stats", "--no-stream", "--no-reset", "--format", "json",
                                "pmstats").stdout)[0]
        used, limit = (size_bytes(x.strip()) for x in row["mem_usage"].split("/"))
        assert abs(limit - (64 << 20)) < 10000, row  # "67.11MB": SI units, 2 decimals
        assert 0 < used < 64 << 20, row
        # The sandbox's init, sleep, and the relay (with its stdin forwarder): a handful.
        assert 2 <= int(row["pids"]) <= 8, row
    finally:
        podman("rm", "-f", "pmstats", check=False)
    end = time.monotonic() + 60
    while sandboxes(isolad, **{"oci.id": cid}):
        assert time.monotonic() < end, "sandbox left after podman rm"
        time.sleep(0.1)


# perl -e: a TCP server on 127.0.0.1:$ARGV[0] (builtins only: no modules in the image) that
# answers each connection with a line naming this container's hostname.
POD_SERVER = ('socket(S, 2, 1, 0) or die "socket: $!"; '
              'bind(S, pack("S n C4 x8", 2, $ARGV[0], 127, 0, 0, 1)) or die "bind: $!"; '
              'listen(S, 5) or die "listen: $!"; open(H, "/proc/sys/kernel/hostname"); '
              '$h = <H>; while (accept(C, S)) { syswrite(C, "from-srv $h"); close(C); }')
# bash: connect to 127.0.0.1:$1 (waiting for the server to listen), print its line.
POD_CLIENT = ('for ((i = 0; i < 600; i++)); do exec 3<>/dev/tcp/127.0.0.1/$1 2>/dev/null && '
              'break; sleep 0.1; done; read -r line <&3 && echo "$line"')


def test_podman_pod_shares_network_and_hostname(podman, isolad):
    """`podman pod create` then two containers with `--pod`: Podman gives them the infra
    container's namespaces as /proc/<its pid>/ns/{net,ipc,uts} (the pid is isola-runc's relay,
    src/runc/podns.c maps those), so they are separate sandboxes in one network, where one
    reaches the other on 127.0.0.1, with the pod's hostname. Neither the host nor a container
    outside the pod reaches that server."""
    port = conftest.free_port()
    podman("pod", "create", "--name", "pmpod", "--network", "none", "--hostname", "pm-pod-host",
           "--infra-image", PAUSE)
    try:
        podman("run", "-d", "--pod", "pmpod", "--name", "pmsrv", IMAGE,
               "perl", "-e", POD_SERVER, port)
        cp = podman("run", "--rm", "--pod", "pmpod", IMAGE, "bash", "-c",
                    POD_CLIENT + '; cat /proc/sys/kernel/hostname', "client", port)
        assert cp.stdout == "from-srv pm-pod-host\npm-pod-host\n", (cp.stdout, cp.stderr)
        ids = {c: podman("inspect", "-f", "{{.ID}}", c).stdout.strip()
               for c in ("pmsrv", podman("pod", "inspect", "-f", "{{.InfraContainerID}}",
                                         "pmpod").stdout.strip())}
        sbs = [sandboxes(isolad, **{"oci.id": i}) for i in ids.values()]
        assert all(len(s) == 1 for s in sbs) and sbs[0][0]["id"] != sbs[1][0]["id"], sbs
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
        cp = podman("run", "--rm", "--network", "none", IMAGE, "bash", "-c",
                    f"exec 3<>/dev/tcp/127.0.0.1/{port}", check=False)
        assert cp.returncode != 0 and "Connection refused" in cp.stderr, (cp.stdout, cp.stderr)
        assert podman("inspect", "-f", "{{.State.Running}}", "pmsrv").stdout.strip() == "true"
    finally:
        podman("pod", "rm", "-f", "-t", "0", "pmpod", check=False)
