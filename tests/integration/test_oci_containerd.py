# SPDX-License-Identifier: Apache-2.0
"""isola-runc under containerd (docs/oci.md, issue 19): the test starts its own containerd
(Debian's 1.6, a config with its own root, state and socket under a temp dir, $ISOLA_SOCKET
in its environment for the runc shim to pass on), imports an OCI image made with umoci from a
rootfs of host binaries (`ctr images import`: no registry), and runs it with `ctr run
--runtime io.containerd.runc.v2 --runc-binary <build>/isola-runc`: the runc shim's own path
to a runc-compatible binary, which is also what a Kubernetes RuntimeClass handler configures
(`BinaryName`)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_oci_runtime  # noqa: E402
from test_oci_runtime import RUNC, make_rootfs, remove_engine_dir, sandboxes  # noqa: E402

netns = test_oci_runtime.netns  # the fixture: a network namespace with a server in it

IMAGE = "localhost/isola-oci-test:1"


class Containerd:
    """A private containerd. cri: lines for its CRI plugin's table; extra: more config
    (tables) after it; netns: the name of a network namespace (`ip netns add`) it runs in
    (`nsenter --net`: only the network namespace changes), so what its CRI's CNI makes stays
    there."""

    def __init__(self, isolad, cri="", extra="", netns=None):
        for tool in ("containerd", "ctr", "umoci"):
            if not shutil.which(tool):
                pytest.fail(f"{tool} is missing: scripts/deps.sh installs it", pytrace=False)
        self.dir = Path(tempfile.mkdtemp(prefix="isola-ctd-", dir="/tmp"))
        self.sock = self.dir / "c.sock"
        cfg = self.dir / "config.toml"
        cfg.write_text(f'''version = 2
root = "{self.dir}/root"
state = "{self.dir}/state"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
{cri}
{extra}
''')
        self.cfg = cfg
        self.netns = netns
        self.env = dict(os.environ, ISOLA_SOCKET=isolad.socket)
        self.env.pop("ISOLA_URL", None)
        self.env.pop("ISOLA_TOKEN", None)
        self.log = open(self.dir / "containerd.log", "wb")
        self.start()

    def start(self):
        wrap = ["nsenter", f"--net=/run/netns/{self.netns}"] if self.netns else []
        self.proc = subprocess.Popen(wrap + ["containerd", "--config", str(self.cfg)],
                                     stdout=self.log,
                                     stderr=self.log, stdin=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True)
        end = time.monotonic() + 60
        while self("version", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                pytest.fail("containerd did not start", pytrace=False)
            time.sleep(0.2)

    def kill9_and_restart(self):
        """containerd dies (SIGKILL) and comes back on the same root and state; the runc
        shims it started live on in sessions of their own, as on a node."""
        self.proc.kill()
        self.proc.wait(timeout=30)
        self.start()

    def __call__(self, *args, check=True, timeout=120):
        cp = subprocess.run(["ctr", "-a", str(self.sock)] + [str(a) for a in args],
                            capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
        if check:
            assert cp.returncode == 0, f"ctr {args}: {cp.returncode}\n{cp.stderr}"
        return cp

    def run_args(self, *args):
        return ("run", "--snapshotter", "native", "--runtime", "io.containerd.runc.v2",
                "--runc-binary", RUNC) + args

    def stop(self):
        if self.proc.poll() is None:
            for ns in self("namespaces", "ls", "-q", check=False).stdout.split():
                for t in self("-n", ns, "task", "ls", "-q", check=False).stdout.split():
                    self("-n", ns, "task", "kill", "-s", "KILL", t, check=False)
                for c in self("-n", ns, "container", "ls", "-q", check=False).stdout.split():
                    self("-n", ns, "task", "rm", "-f", c, check=False)
                    self("-n", ns, "container", "rm", c, check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()
        remove_engine_dir(self.dir)


def import_image(c, work, base_name, namespace="default", cmd=None, extra=()):
    """Makes an OCI image (tag 1) of make_rootfs's rootfs, the host files in extra added to
    its /bin, its config's Cmd cmd when given, with umoci in work, and imports it into c's
    namespace (`ctr images import`: no registry), unpacked for the native snapshotter."""
    root = work / "rootfs"
    make_rootfs(root)
    for f in extra:
        shutil.copy2(f, root / "bin" / Path(f).name)
    layout = work / "layout"

    def umoci(*a):
        cp = subprocess.run(["umoci"] + [str(x) for x in a], capture_output=True,
                            text=True, timeout=300)
        assert cp.returncode == 0, f"umoci {a}: {cp.stderr}"

    umoci("init", "--layout", layout)
    umoci("new", "--image", f"{layout}:1")
    if cmd:
        umoci("config", "--image", f"{layout}:1", *[f"--config.cmd={a}" for a in cmd])
    umoci("unpack", "--image", f"{layout}:1", work / "bundle")
    shutil.copytree(root, work / "bundle" / "rootfs", dirs_exist_ok=True, symlinks=True)
    umoci("repack", "--image", f"{layout}:1", work / "bundle")
    tar = work / "image.tar"
    subprocess.run(["tar", "-C", str(layout), "-cf", str(tar), "."], check=True)
    c("-n", namespace, "images", "import", "--snapshotter", "native", "--base-name", base_name,
      tar)


@pytest.fixture(scope="module")
def ctr(isolad, tmp_path_factory):
    c = Containerd(isolad)
    try:
        import_image(c, tmp_path_factory.mktemp("oci-ctr-image"), "localhost/isola-oci-test")
        yield c
    finally:
        c.stop()


def test_ctr_run_exec_pause_kill(ctr, isolad):
    # The runc shim keeps runtime state under /run/containerd/runc/<namespace>/<id> whatever
    # containerd's own root: ids unique to this session keep concurrent sessions apart.
    r1, d1 = f"r1-{os.getpid()}", f"d1-{os.getpid()}"
    cp = ctr(*ctr.run_args("--rm", IMAGE, r1, "sh", "-c", "echo ctr-hi; exit 3"),
             check=False)
    assert cp.returncode == 3 and cp.stdout == "ctr-hi\n", cp.stderr

    ctr(*ctr.run_args("-d", IMAGE, d1, "sleep", "1000"))
    try:
        assert len(sandboxes(isolad, **{"oci.id": d1})) == 1
        cp = ctr("task", "exec", "--exec-id", "e1", d1, "sh", "-c", "echo exec-ok; exit 4",
                 check=False)
        assert cp.returncode == 4 and cp.stdout == "exec-ok\n", cp.stderr
        pids = ctr("task", "ps", d1).stdout.split()
        assert len(pids) >= 3, pids  # header, the sandbox's init and sleep (host pids)
        ctr("task", "pause", d1)
        assert "PAUSED" in ctr("task", "ls").stdout
        ctr("task", "resume", d1)
        assert "RUNNING" in ctr("task", "ls").stdout
        ctr("task", "kill", "-s", "TERM", d1)
        end = time.monotonic() + 60
        while "STOPPED" not in ctr("task", "ls").stdout:
            assert time.monotonic() < end, ctr("task", "ls").stdout
            time.sleep(0.1)
        cp = ctr("task", "rm", d1)
        assert "143" in cp.stderr, cp.stderr  # "task d1 exit with non-zero exit code 143"
    finally:
        ctr("task", "rm", "-f", d1, check=False)
        ctr("container", "rm", d1, check=False)
        for cid in (r1, d1):  # what a failed runtime left in the shim's runtime root
            shutil.rmtree(f"/run/containerd/runc/default/{cid}", ignore_errors=True)
    end = time.monotonic() + 60
    while sandboxes(isolad, **{"oci.id": d1}):
        assert time.monotonic() < end, "sandbox left after ctr container rm"
        time.sleep(0.1)


def test_ctr_run_with_ns_and_bind_mount(ctr, isolad, netns, tmp_path):
    """What Kubernetes' CRI does for a pod: the network namespace CNI made (`--with-ns
    network:PATH`, a `linux.namespaces` path) and volumes (`--mount`, spec binds)."""
    vol = tmp_path / "vol"
    vol.mkdir()
    (vol / "v.txt").write_text("volume-data\n")
    cid = f"n1-{os.getpid()}"
    script = ("cat /vol/v.txt; grep -c isolat0 /proc/net/dev; "
              f"exec 3<>/dev/tcp/127.0.0.1/{netns['port']} && read -r line <&3 && echo $line")
    try:
        cp = ctr(*ctr.run_args("--rm", "--with-ns", f"network:{netns['path']}", "--mount",
                               f"type=bind,src={vol},dst=/vol,options=rbind:ro", IMAGE, cid,
                               "bash", "-c", script), check=False)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout == f"volume-data\n1\n{netns['token']}\n", cp.stdout
    finally:
        ctr("task", "rm", "-f", cid, check=False)
        ctr("container", "rm", cid, check=False)
        shutil.rmtree(f"/run/containerd/runc/default/{cid}", ignore_errors=True)


def test_ctr_task_metrics_are_the_containers(ctr, isolad):
    """`ctr task metrics` reads the cgroups the shim loaded from the relay's pid once `create`
    returned: the relay is in its sandbox's cgroups, so the numbers are the container's (its
    64 MiB limit, its few pids), not containerd's."""
    cid = f"m1-{os.getpid()}"
    ctr(*ctr.run_args("-d", "--memory-limit", str(64 << 20), IMAGE, cid, "sleep", "1000"))
    try:
        m = json.loads(ctr("task", "metrics", "--format", "json", cid).stdout)
        assert m["memory"]["usage"]["limit"] == 64 << 20, m["memory"]
        assert 0 < m["memory"]["usage"]["usage"] < 64 << 20, m["memory"]
        # The sandbox's init, sleep, and the relay (with its stdin forwarder): a handful.
        assert 2 <= m["pids"]["current"] <= 8, m["pids"]
        assert m["cpu"]["usage"]["total"] > 0, m["cpu"]
    finally:
        ctr("task", "kill", "-s", "KILL", cid, check=False)
        ctr("task", "rm", "-f", cid, check=False)
        ctr("container", "rm", cid, check=False)
        shutil.rmtree(f"/run/containerd/runc/default/{cid}", ignore_errors=True)
    end = time.monotonic() + 60
    while sandboxes(isolad, **{"oci.id": cid}):
        assert time.monotonic() < end, "sandbox left after ctr container rm"
        time.sleep(0.1)


def test_a_containerd_restart_loses_no_container(ctr, isolad):
    """Issue 19: a restart of the engine loses nothing. containerd is killed (SIGKILL) under a
    running task and started again: the task is still RUNNING (its shim and isola-runc's
    state survive, the sandbox never depended on containerd), exec and kill work, the exit
    status is the process's, and removing it destroys the sandbox."""
    cid = f"rs-{os.getpid()}"
    ctr(*ctr.run_args("-d", IMAGE, cid, "sleep", "1000"))
    try:
        sid = sandboxes(isolad, **{"oci.id": cid})[0]["id"]
        ctr.kill9_and_restart()
        assert any(ln.split()[:1] == [cid] and "RUNNING" in ln
                   for ln in ctr("task", "ls").stdout.splitlines()), ctr("task", "ls").stdout
        assert [s["id"] for s in sandboxes(isolad, **{"oci.id": cid})] == [sid]
        cp = ctr("task", "exec", "--exec-id", "e1", cid, "sh", "-c", "echo still-here",
                 check=False)
        assert cp.returncode == 0 and cp.stdout == "still-here\n", cp.stderr
        ctr("task", "kill", "-s", "TERM", cid)
        end = time.monotonic() + 60
        while "STOPPED" not in ctr("task", "ls").stdout:
            assert time.monotonic() < end, ctr("task", "ls").stdout
            time.sleep(0.1)
        cp = ctr("task", "rm", cid)
        assert "143" in cp.stderr, cp.stderr
    finally:
        ctr("task", "rm", "-f", cid, check=False)
        ctr("container", "rm", cid, check=False)
        shutil.rmtree(f"/run/containerd/runc/default/{cid}", ignore_errors=True)
    end = time.monotonic() + 60
    while sandboxes(isolad, **{"oci.id": cid}):
        assert time.monotonic() < end, "sandbox left after ctr container rm"
        time.sleep(0.1)
