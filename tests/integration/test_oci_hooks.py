# SPDX-License-Identifier: Apache-2.0
"""isola-runc runs the spec's POSIX-platform hooks on the host as runc does (docs/oci.md,
"Hooks"): prestart and createRuntime before create returns, poststart after start, poststop
after delete, each with the OCI state on its stdin, its own args, env and timeout. A new
network namespace asked for together with prestart/createRuntime hooks is an empty one of
isola-runc's (ROOT/ID/netns) that the hook programs, as Docker's libnetwork-setkey does."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_oci_runtime import make_bundle, make_rootfs, runc, sandboxes  # noqa: E402,F401

KINDS = ("prestart", "createRuntime", "poststart", "poststop")

# The hook: records its state, env and args, and (prestart) programs the container's network
# namespace through /proc/PID/ns/net, as dockerd does for libnetwork-setkey.
HOOK = r'''
import json, os, subprocess, sys
kind, out = sys.argv[1], sys.argv[2]
state = json.load(sys.stdin)
pid = state["pid"]
# (LC_CTYPE: python's own locale coercion, PEP 538)
env = {k: v for k, v in os.environ.items() if k != "LC_CTYPE"}
rec = {"state": state, "env": env, "argv": sys.argv[1:]}
if pid:
    rec["ns"] = {t: os.readlink(f"/proc/{pid}/ns/{t}") for t in ("net", "pid")}
with open(os.path.join(out, kind), "w") as f:
    json.dump(rec, f)
with open(os.path.join(out, "order"), "a") as f:
    f.write(kind + "\n")
if kind == "prestart" and os.environ.get("HOOK_PROGRAM"):
    ns = f"--net=/proc/{pid}/ns/net"
    for cmd in (["ip", "link", "add", "hookveth0", "type", "veth", "peer", "name", "hookveth1"],
                ["ip", "addr", "add", "10.251.0.7/24", "dev", "hookveth0"],
                ["ip", "link", "set", "hookveth0", "up"]):
        subprocess.run(["/usr/bin/nsenter", ns] + cmd, check=True)
code = int(os.environ.get("HOOK_EXIT", "0"))
if code:
    print(f"{kind} says no", file=sys.stderr)
sys.exit(code)
'''


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory):
    """test_oci_runtime's rootfs with readlink (the container names its namespaces)."""
    root = tmp_path_factory.mktemp("oci-hooks-rootfs") / "rootfs"
    make_rootfs(root)
    shutil.copy2(os.path.realpath(shutil.which("readlink")), root / "bin" / "readlink")
    return root


def hooks_edit(tmp_path, kinds=KINDS, env=(), timeout=60):
    """An edit for make_bundle: the recording hook for each of kinds."""
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)

    def edit(c):
        c["hooks"] = {k: [{"path": "/usr/bin/python3",
                           "args": ["python3", str(hook), k, str(out)],
                           "env": [f"HOOK_KIND={k}"] + list(env), "timeout": timeout}]
                      for k in kinds}
        c["annotations"] = {"org.example": "hooked"}
    return out, edit


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


def test_hooks_run_with_the_state_in_runcs_order(runc, rootfs, tmp_path, isolad):
    out, edit = hooks_edit(tmp_path, env=["HOOK_PROGRAM=1"])

    def edit2(c):
        edit(c)
        c["linux"]["sysctl"] = {"net.ipv4.ip_unprivileged_port_start": "0"}
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "exit 0"], edit2)
    runc("create", "--bundle", b, "h1", check=True)
    assert (out / "order").read_text() == "prestart\ncreateRuntime\n"
    st = runc.state("h1")
    assert st["status"] == "created" and st["pid"] > 0
    for k in ("prestart", "createRuntime"):
        rec = json.loads((out / k).read_text())
        s = rec["state"]
        assert s["id"] == "h1" and s["status"] == "created" and s["pid"] == st["pid"], s
        assert s["bundle"] == str(b) and s["annotations"] == {"org.example": "hooked"}, s
        # Its env is the spec's alone (nothing of isola-runc's), its args as given.
        assert rec["env"] == {"HOOK_KIND": k, "HOOK_PROGRAM": "1"}, rec["env"]
        assert rec["argv"] == [k, str(out)]
    # The network namespace is an empty one of isola-runc's, joined by the sandbox, and the
    # hook programmed it through the pid it was given.
    netns = runc.root / "h1" / "netns"
    assert mounted(netns)
    sb = sandboxes(isolad, **{"oci.id": "h1"})[0]
    assert sb["network"] == {"mode": "joined", "path": str(netns)}, sb
    pre = json.loads((out / "prestart").read_text())
    assert pre["ns"]["net"] == f"net:[{os.stat(netns).st_ino}]"
    cp = runc("exec", "h1", "bash", "-c",
              "grep -c hookveth0 /proc/net/dev; readlink /proc/self/ns/net /proc/self/ns/pid;"
              " cat /proc/sys/net/ipv4/ip_unprivileged_port_start; grep -c lo: /proc/net/dev")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["1", pre["ns"]["net"], pre["ns"]["pid"], "0", "1"], cp.stdout

    runc("start", "h1", check=True)
    s = json.loads((out / "poststart").read_text())["state"]
    assert s["status"] == "running" and s["pid"] == st["pid"], s
    runc.wait_status("h1", "stopped")
    assert not (out / "poststop").exists()
    runc("delete", "h1", check=True)
    s = json.loads((out / "poststop").read_text())["state"]
    assert s["status"] == "stopped" and s["id"] == "h1", s
    assert (out / "order").read_text().split() == list(KINDS)
    # Delete took the namespace away with the state dir.
    assert not mounted(netns) and not (runc.root / "h1").exists()


def test_own_network_without_create_hooks(runc, rootfs, tmp_path, isolad):
    """poststart/poststop alone: isola's own network as before (nothing to program)."""
    out, edit = hooks_edit(tmp_path, kinds=("poststart", "poststop"))
    b = make_bundle(runc, rootfs, tmp_path, ["sleep", "1000"], edit)
    runc("create", "--bundle", b, "h2", check=True)
    assert sandboxes(isolad, **{"oci.id": "h2"})[0]["network"] == {"mode": "own"}
    assert not (runc.root / "h2" / "netns").exists() and not (out / "order").exists()
    runc("delete", "--force", "h2", check=True)
    assert (out / "order").read_text() == "poststop\n"


def test_failing_prestart_fails_create_and_leaves_nothing(runc, rootfs, tmp_path, isolad):
    out, edit = hooks_edit(tmp_path, kinds=("prestart", "createRuntime"), env=["HOOK_EXIT=3"])
    b = make_bundle(runc, rootfs, tmp_path, ["true"], edit)
    cp = runc("create", "--bundle", b, "f1")
    assert cp.returncode == 1, cp.stderr
    assert ("create container `f1`: hook `prestart[0]` `/usr/bin/python3` exited with status 3:"
            " prestart says no") in cp.stderr, cp.stderr
    # The first failure stops the rest; the sandbox, state dir and namespace are gone.
    assert (out / "order").read_text() == "prestart\n"
    assert sandboxes(isolad, **{"oci.id": "f1"}) == []
    assert not (runc.root / "f1").exists() and not mounted(runc.root / "f1" / "netns")


def test_hook_timeout_kills_it(runc, rootfs, tmp_path, isolad):
    def edit(c):
        c["hooks"] = {"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", "600"],
                                         "timeout": 1}]}
    b = make_bundle(runc, rootfs, tmp_path, ["true"], edit)
    cp = runc("create", "--bundle", b, "t1")
    assert cp.returncode == 1, cp.stderr
    assert "hook `createRuntime[0]` `/bin/sleep` timed out after 1 s (killed)" in cp.stderr
    assert sandboxes(isolad, **{"oci.id": "t1"}) == [] and not (runc.root / "t1").exists()


def test_failing_poststart_and_poststop_are_warnings(runc, rootfs, tmp_path, isolad):
    """A failing poststart or poststop hook is a warning, and the hooks after it still run
    (the spec: "the remaining hooks and lifecycle continue as if the hook had succeeded";
    runtime-tools' poststart_fail and poststop_fail)."""
    out, edit = hooks_edit(tmp_path, kinds=("poststart", "poststop"), env=["HOOK_EXIT=2"])

    def edit_then_a_good_hook(c):
        edit(c)
        for k in ("poststart", "poststop"):
            good = dict(c["hooks"][k][0], env=[f"HOOK_KIND={k}"])
            good["args"] = good["args"][:2] + [f"{k}-after"] + good["args"][3:]
            c["hooks"][k].append(good)
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "exit 0"], edit_then_a_good_hook)
    runc("create", "--bundle", b, "w1", check=True)
    cp = runc("start", "w1", check=True)
    assert "warning: hook `poststart[0]` `/usr/bin/python3` exited with status 2" in cp.stderr
    assert "poststart[1]" not in cp.stderr, cp.stderr
    runc.wait_status("w1", "stopped")
    cp = runc("delete", "w1", check=True)
    assert "warning: hook `poststop[0]`" in cp.stderr, cp.stderr
    assert (out / "order").read_text() == "poststart\npoststart-after\npoststop\npoststop-after\n"
    assert sandboxes(isolad, **{"oci.id": "w1"}) == []


def test_hook_child_holding_its_output_does_not_hold_create(runc, rootfs, tmp_path, isolad):
    """A hook that exits leaving a child with its stdout open (a daemon it started) is done:
    its own exit ends the wait, as its status is all that counts."""
    pidf = tmp_path / "bg.pid"

    def edit(c):
        c["hooks"] = {"prestart": [{"path": "/bin/sh", "args": [
            "sh", "-c", f"sleep 600 & echo $! > {pidf}; echo started"]}]}
    b = make_bundle(runc, rootfs, tmp_path, ["true"], edit)
    try:
        runc("create", "--bundle", b, "bg1", check=True, timeout=300)
        assert runc.state("bg1")["status"] == "created"
    finally:
        if pidf.exists():
            try:
                os.kill(int(pidf.read_text()), 9)
            except ProcessLookupError:
                pass
