# SPDX-License-Identifier: Apache-2.0
"""A Kubernetes pod through containerd's CRI plugin with the `isola` runtime handler
(docs/kubernetes.md, docs/oci.md "A pod's namespaces"): the test's own containerd (Debian's
1.6) configured as a node would be (the handler from deploy/kubernetes/containerd-isola.toml
with BinaryName = the build's isola-runc, a pause image made here, CNI with Debian's bridge,
host-local and loopback plugins on a private subnet), run inside a network namespace the test
makes so its CNI bridge and pod veths stay there, and driven by cri_client.py as a kubelet
drives it: RunPodSandbox, CreateContainer, StartContainer, ExecSync, StopPodSandbox,
RemovePodSandbox."""

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cri_client import CONTAINER, CONTAINER_EXITED, CONTAINER_RUNNING, CRI, POD  # noqa: E402
from test_oci_containerd import Containerd, import_image  # noqa: E402
from test_oci_docker_net import FETCH, SERVER_C  # noqa: E402
from test_oci_runtime import RUNC, remove_engine_dir, sandboxes  # noqa: E402

IMAGE = "localhost/isola-cri:1"
SUBNET = "10.123.45"  # the pods' CNI subnet, inside the test's namespace only
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "containerd-isola.toml"
SHIM_ROOT = Path("/run/containerd/runc/k8s.io")  # the runc shim's --root for the CRI's namespace
CNI_CACHE = Path("/var/lib/cni/results")  # libcni's, whatever the CRI's config says


def handler_config():
    """deploy/kubernetes' containerd drop-in (the `isola` handler) with this build's
    isola-runc as its BinaryName, as a table of the test's containerd config."""
    text = DEPLOY.read_text()
    assert 'BinaryName = "/usr/local/bin/isola-runc"' in text
    lines = [ln for ln in text.splitlines() if not ln.startswith("version")]
    return "\n".join(lines).replace("/usr/local/bin/isola-runc", str(RUNC))


@pytest.fixture(scope="module")
def node(isolad, tmp_path_factory):
    """(containerd, CRI client, work dir): a node's containerd in a namespace of ours."""
    for tool in ("nsenter", "ip", "cc"):
        assert subprocess.run(["which", tool], capture_output=True).returncode == 0, tool
    plugins = Path("/usr/lib/cni")
    for p in ("bridge", "host-local", "loopback"):
        if not (plugins / p).exists():
            pytest.fail(f"CNI plugin `{p}` is missing: scripts/deps.sh installs "
                        "containernetworking-plugins", pytrace=False)
    work = tmp_path_factory.mktemp("oci-cri")
    bindir, confdir = work / "cni-bin", work / "cni-conf"
    bindir.mkdir()
    confdir.mkdir()
    for p in ("bridge", "host-local", "loopback"):
        (bindir / p).symlink_to(plugins / p)
    (confdir / "10-isola-cri.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": "isola-cri",
        "plugins": [{"type": "bridge", "bridge": "isolacri0", "isGateway": True,
                     "ipMasq": False, "hairpinMode": True,
                     "ipam": {"type": "host-local", "dataDir": str(work / "ipam"),
                              "ranges": [[{"subnet": f"{SUBNET}.0/24"}]]}}]}))
    server = work / "tcpserve"
    subprocess.run(["cc", "-O2", "-o", str(server), "-x", "c", "-"], input=SERVER_C,
                   text=True, check=True)
    name = f"isola-cri{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    c = cri = None
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        cri_table = f'''  sandbox_image = "{IMAGE}"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{bindir}"
    conf_dir = "{confdir}"
'''
        c = Containerd(isolad, cri=cri_table, extra=handler_config(), netns=name)
        import_image(c, work, "localhost/isola-cri", namespace="k8s.io",
                     cmd=["sleep", "infinity"],
                     extra=[server, shutil.which("echo"), shutil.which("hostname")])
        cri = CRI(c.sock)
        yield c, cri, work
    finally:
        if cri:
            cri.close()
        if c:
            c.stop()
        for cid in cri.made if cri else []:  # what a failed run left in the shim's root,
            remove_engine_dir(SHIM_ROOT / cid)  # and in libcni's result cache (a pod never
            for f in CNI_CACHE.glob(f"*-{cid}-*"):  # torn down), by id
                f.unlink()
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():  # whatever a failure left in our namespace, by pid
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "delete", name], check=False)


def pod_config(work, name):
    return CRI.pod_config(name, str(uuid.uuid4()), f"{name}-host", log_dir=str(work / "logs"))


def wait_for(what, cond, timeout=60):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.1)


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


def test_pod_of_the_isola_handler(node, isolad, cli):
    c, cri, work = node
    v = cri.version()
    assert v["runtime_name"] == "containerd" and v["runtime_api_version"] == "v1", v
    assert any(IMAGE in tags for tags in cri.list_images()), cri.list_images()

    config = pod_config(work, "cri-pod")
    pod = cri.run_pod(config, "isola")
    ids = [pod]
    try:
        st = cri.pod_status(pod)
        assert st["runtime_handler"] == "isola" and st["ip"].startswith(f"{SUBNET}."), st
        # The pause container is an isola sandbox that joined the pod's CNI namespace.
        [pause] = sandboxes(isolad, **{"oci.id": pod})
        podns = pause["network"]["path"]
        assert pause["network"]["mode"] == "joined" and podns.startswith(str(c.dir)), pause
        # The pod IP is on eth0 of that namespace (CNI's bridge plugin put it there).
        eth0 = subprocess.run(["nsenter", f"--net={podns}", "ip", "-4", "-o", "addr", "show",
                               "eth0"], capture_output=True, text=True, check=True).stdout
        assert f" {st['ip']}/24 " in eth0, eth0

        token = secrets.token_hex(8)
        srv = cri.create_container(pod, config, "srv", IMAGE, ["tcpserve", "8080", token])
        ids.append(srv)
        cri.start_container(srv)
        app = cri.create_container(pod, config, "app", IMAGE, ["sleep", "infinity"])
        ids.append(app)
        cri.start_container(app)
        assert cri.container_status(app)["state"] == CONTAINER_RUNNING

        assert cri.exec_sync(app, ["echo", "hi"]) == (0, "hi\n", "")
        assert cri.exec_sync(app, ["sh", "-c", "exit 3"])[0] == 3
        # The pod's hostname (the pause container's), in a uts namespace of the app's own.
        assert cri.exec_sync(app, ["hostname"]) == (0, "cri-pod-host\n", "")
        # The pod's network: the same namespace as the pause container's, so its eth0
        # address, and the server of another container of the pod over 127.0.0.1.
        for cid in (srv, app):
            [sb] = sandboxes(isolad, **{"oci.id": cid})
            assert sb["network"] == {"mode": "joined", "path": podns}, sb
        code, out, err = cri.exec_sync(app, ["grep", "-c", f"{st['ip']}$",
                                             "/proc/net/fib_trie"])
        assert code == 0 and int(out) >= 1, (out, err)
        code, out, err = cri.exec_sync(app, ["grep", "-c", "eth0:", "/proc/net/dev"])
        assert (code, out) == (0, "1\n"), err
        code, out, err = cri.exec_sync(
            app, ["bash", "-c", FETCH.replace("{host}", "127.0.0.1").replace("{port}", "8080")])
        assert (code, out) == (0, f"{token}\n"), err

        # Every container of the pod is an isola sandbox in `isola ls`, labelled with its
        # bundle (the shim's, under containerd's state dir).
        ls = cli("ls", json=True)
        assert ls.returncode == 0, ls.stderr
        rows = json.loads(ls.stdout)
        rows = rows["sandboxes"] if isinstance(rows, dict) else rows
        labels = {s["labels"].get("oci.id"): s["labels"] for s in rows}
        for cid in ids:
            assert labels[cid]["oci.bundle"] == \
                str(c.dir / "state" / "io.containerd.runtime.v2.task" / "k8s.io" / cid)

        cri.stop_container(srv, timeout=5)
        assert cri.container_status(srv)["state"] == CONTAINER_EXITED
        cri.remove_container(srv)
        ids.remove(srv)
        wait_for("srv's sandbox left", lambda: not sandboxes(isolad, **{"oci.id": srv}))
    finally:
        cri.stop_pod(pod)
        cri.remove_pod(pod)
    for cid in ids + [srv]:
        wait_for(f"{cid}'s sandbox left", lambda: not sandboxes(isolad, **{"oci.id": cid}))
        assert not (SHIM_ROOT / cid).exists(), cid
    assert not Path(podns).exists() and not mounted(podns), podns


def test_a_shared_pid_namespace_is_refused_naming_it(node, isolad):
    """shareProcessNamespace: the CRI names the pause container's pid namespace by its
    task's pid (the relay): refused at StartContainer, naming it, leaving nothing."""
    c, cri, work = node
    config = pod_config(work, "cri-pid")
    pod = cri.run_pod(config, "isola")
    try:
        cid = cri.create_container(pod, config, "shared", IMAGE, ["sleep", "infinity"],
                                   pid_mode=POD)
        with pytest.raises(grpc.RpcError) as e:
            cri.start_container(cid)
        assert "pid namespace of container" in e.value.details() and \
            "shareProcessNamespace" in e.value.details(), e.value.details()
        assert not sandboxes(isolad, **{"oci.id": cid})
        # A container of the same pod with a pid namespace of its own starts.
        ok = cri.create_container(pod, config, "own", IMAGE, ["sleep", "infinity"],
                                  pid_mode=CONTAINER)
        cri.start_container(ok)
        assert cri.exec_sync(ok, ["echo", "ok"]) == (0, "ok\n", "")
    finally:
        cri.stop_pod(pod)
        cri.remove_pod(pod)
    wait_for("the pod's sandboxes left", lambda: not sandboxes(isolad, **{"oci.id": pod}))
