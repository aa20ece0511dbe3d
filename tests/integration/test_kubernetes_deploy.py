# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes (issue 19, item 4): the manifests agree with each other (RuntimeClass
handler = containerd runtime name, the examples use the class, the DaemonSet runs where the
class schedules), and node-install.sh, run against a host root in a temp dir, installs isola
relocated under /opt/isola with its own libraries (the binaries run with nothing of the
build's tree), adds the `isola` handler to containerd's configuration as containerd itself
reads it (`containerd config dump`), is idempotent, and refuses what it must not rewrite.
What cannot be tested here: a kubelet scheduling a pod of the class (docs/kubernetes.md)."""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tenancy_util import ROOT_CONFTEST

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
BUILD = ROOT_CONFTEST.BUILD
AGENT = ROOT_CONFTEST.AGENT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="install and mount namespaces need root")


def docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_manifests_agree():
    rc = docs(DEPLOY / "runtimeclass.yaml")[0]
    assert rc["kind"] == "RuntimeClass" and rc["metadata"]["name"] == "isola", rc
    toml = (DEPLOY / "containerd-isola.toml").read_text()
    assert f'containerd.runtimes.{rc["handler"]}]' in toml, "the handler is not containerd's runtime"
    ds = next(d for d in docs(DEPLOY / "daemonset.yaml") if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == rc["scheduling"]["nodeSelector"], \
        "pods of the class would be scheduled on nodes the installer does not run on"
    cmd = spec["containers"][0]["command"][0]
    assert f"COPY node-install.sh containerd-isola.toml {os.path.dirname(cmd)}/" in \
        (DEPLOY / "Dockerfile").read_text(), f"the image has no {cmd}"
    pod = docs(DEPLOY / "examples" / "pod.yaml")[0]
    assert pod["spec"]["runtimeClassName"] == "isola"
    sb = docs(DEPLOY / "examples" / "sandbox.yaml")[0]
    assert sb["apiVersion"] == "agents.x-k8s.io/v1alpha1" and sb["kind"] == "Sandbox"
    assert sb["spec"]["podTemplate"]["spec"]["runtimeClassName"] == "isola"


@pytest.fixture(scope="module")
def stage():
    """What the image carries: a staged install under /opt/isola plus isola-runc."""
    d = Path(tempfile.mkdtemp(prefix="isola-k8s-stage-"))
    env = dict(os.environ, DESTDIR=str(d))
    cp = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), "--build", str(BUILD),
                         "--agent", str(AGENT), "--prefix", "/opt/isola", "--no-group"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    shutil.copy2(BUILD / "src" / "runc" / "isola-runc", d / "opt/isola/bin/isola-runc")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def host():
    d = Path(tempfile.mkdtemp(prefix="isola-k8s-host-"))
    (d / "etc").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def node_install(stage, host, *args):
    env = dict(os.environ, ISOLA_HOST_ROOT=str(host), ISOLA_NODE_STAGE=str(stage))
    return subprocess.run(["sh", str(DEPLOY / "node-install.sh"), "--once", "--no-restart", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_symlink():
            h.update(os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def on_host(host, script):
    """Runs script in a private mount namespace where the host root's /opt/isola and
    /etc/containerd are at their real paths (nothing of this machine's is changed)."""
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-ec",
         f"mount -t tmpfs isola-k8s /opt; mkdir /opt/isola; mount --bind {host}/opt/isola /opt/isola;"
         f"mkdir -p /etc/containerd; mount --bind {host}/etc/containerd /etc/containerd; {script}"],
        capture_output=True, text=True, timeout=120)


def test_node_install_relocates_isola_and_adds_the_containerd_handler(stage, host):
    cp = node_install(stage, host)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    for f in ("opt/isola/bin/isolad", "opt/isola/bin/isola", "opt/isola/bin/isola-runc",
              "opt/isola/libexec/isola/isola-agent", "etc/systemd/system/isolad.service",
              "etc/containerd/conf.d/isola.toml"):
        assert (host / f).exists(), f"node-install did not write /{f}"
    assert os.readlink(host / "usr/local/bin/isola-runc") == "/opt/isola/bin/isola-runc"
    assert "ExecStart=/opt/isola/bin/isolad " in \
        (host / "etc/systemd/system/isolad.service").read_text()
    # the binaries' interpreter and libraries are the carried ones
    interp = subprocess.run(["patchelf", "--print-interpreter", host / "opt/isola/bin/isolad"],
                            capture_output=True, text=True).stdout.strip()
    assert interp.startswith("/opt/isola/lib/"), interp
    # they run at the host's paths with no build tree, and containerd reads the handler
    cp = on_host(host, "/opt/isola/bin/isola-runc --version; /opt/isola/bin/isola --version;"
                       "LD_DEBUG=libs /opt/isola/bin/isolad --help 2>&1 | grep 'calling init' ;"
                       "containerd --config /etc/containerd/config.toml config dump")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "isola-runc version" in cp.stdout and "isola 0." in cp.stdout, cp.stdout
    inits = [ln for ln in cp.stdout.splitlines() if "calling init:" in ln]
    assert inits and all("/opt/isola/lib/" in ln for ln in inits), inits
    dump = cp.stdout
    i = dump.index('containerd.runtimes.isola]')
    section = dump[i:i + 2000]
    assert 'runtime_type = "io.containerd.runc.v2"' in section, section
    assert 'BinaryName = "/usr/local/bin/isola-runc"' in section, section


def test_node_install_twice_leaves_the_same_files(stage, host):
    assert node_install(stage, host).returncode == 0
    first = digest(host)
    cp = node_install(stage, host)
    assert cp.returncode == 0, cp.stderr
    assert digest(host) == first, "a second run changed the host's files"


def test_node_install_keeps_an_operators_containerd_config(stage, host):
    cfg = host / "etc/containerd/config.toml"
    cfg.parent.mkdir(parents=True)
    own = 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n'
    cfg.write_text(own)
    assert node_install(stage, host).returncode == 0
    text = cfg.read_text()
    assert text.startswith('imports = ["/etc/containerd/conf.d/isola.toml"]\n'), text
    assert text.endswith(own), "the operator's settings were not kept as they were"
    # an imports list of the operator's own is never rewritten: a clear refusal instead
    theirs = 'version = 2\nimports = ["/etc/containerd/other.toml"]\n'
    cfg.write_text(theirs)
    cp = node_install(stage, host)
    assert cp.returncode == 1 and "/etc/containerd/conf.d/isola.toml" in cp.stderr, cp.stderr
    assert cfg.read_text() == theirs


def test_node_install_refuses_a_missing_host_root_or_stage(stage, host):
    env = dict(os.environ, ISOLA_HOST_ROOT=str(host / "nope"), ISOLA_NODE_STAGE=str(stage))
    cp = subprocess.run(["sh", str(DEPLOY / "node-install.sh"), "--once", "--no-restart"],
                        capture_output=True, text=True, env=env)
    assert cp.returncode == 1 and "ISOLA_HOST_ROOT" in cp.stderr, cp.stderr
    env = dict(os.environ, ISOLA_HOST_ROOT=str(host), ISOLA_NODE_STAGE=str(host / "empty"))
    cp = subprocess.run(["sh", str(DEPLOY / "node-install.sh"), "--once", "--no-restart"],
                        capture_output=True, text=True, env=env)
    assert cp.returncode == 1 and "no staged isolad" in cp.stderr, cp.stderr
    cp = subprocess.run(["sh", str(DEPLOY / "node-install.sh"), "--bogus"], capture_output=True,
                        text=True)
    assert cp.returncode == 1 and "--bogus" in cp.stderr, cp.stderr
