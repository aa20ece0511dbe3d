# SPDX-License-Identifier: Apache-2.0
"""microvm persistence (docs/microvm.md "Snapshots, pause and fork"): pause stops the vCPUs,
a snapshot carries every guest process with its memory into restores and forks, restores are
independent copies with their own identity, and a bad snapshot or shape fails cleanly.

Judged at the sinks: a counter that lives only in a guest process's memory, the QEMU
processes and their vCPU threads on the host, files in the state directory. One source VM
is shared by most checks (TCG in CI: each restore boots nothing but still costs seconds).
"""

import os
import time
from pathlib import Path

import pytest

from test_microvm import create_vm, kill9_mid_launch, qemu_pids
from test_microvm import pytestmark  # noqa: F401 (module-level skip comes along)

OP_TIMEOUT = 300


def counter_loop(api, sid):
    """A shell whose loop variable lives only in its memory; it writes it out each step."""
    p = api.start_process(sid, cmd=["sh", "-c",
                                    "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter;"
                                    " sleep 0.1; done"])
    return p["pid"]


def read_counter(api, sid):
    deadline = time.monotonic() + 30
    while True:
        out = api.exec(sid, cmd=["sh", "-c", "cat /tmp/counter 2>/dev/null; true"])["stdout"]
        if out.strip().isdigit():
            return int(out)
        assert time.monotonic() < deadline, "counter never written"
        time.sleep(0.1)


def counter_advances(api, sid, above):
    """The counter goes past `above` within a bounded wait; returns the value seen."""
    deadline = time.monotonic() + 30
    while True:
        v = read_counter(api, sid)
        if v > above:
            return v
        assert time.monotonic() < deadline, f"counter stuck at {v} (<= {above})"
        time.sleep(0.3)


def vcpu_ticks(pid):
    """utime+stime of QEMU's vCPU threads (named `CPU n/TCG` or `CPU n/KVM`)."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (t / "comm").read_text().startswith("CPU "):
                continue
            f = (t / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12])
    return total


def qemu_of(sid):
    pids = [p for p, i in qemu_pids().items() if i == sid]
    assert len(pids) == 1, f"QEMU processes of {sid}: {pids}"
    return pids[0]


def snapshot(api, sid, name, status=201):
    r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": name},
                    timeout=OP_TIMEOUT)
    assert r.status == status, f"snapshot {sid} as {name}: {r}"
    return r.json()


def restore(api, name, status=201, **fields):
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": name, **fields},
                    timeout=OP_TIMEOUT)
    assert r.status == status, f"restore {name}: {r}"
    return r.json()


@pytest.fixture(scope="module")
def src(isolad):
    api = isolad.client(timeout=60)
    t0 = time.monotonic()
    sb = create_vm(api, memory="256M", cpu=1)
    print(f"microvm cold create: {time.monotonic() - t0:.2f}s")
    sb["counter_pid"] = counter_loop(api, sb["id"])
    read_counter(api, sb["id"])
    yield sb
    if isolad.alive():
        api.delete_sandbox(sb["id"])


def test_pause_stops_vcpus_and_resume_continues(api, src):
    sid = src["id"]
    before = read_counter(api, sid)
    r = api.request("POST", f"/v1/sandboxes/{sid}/pause", timeout=OP_TIMEOUT)
    assert r.status == 200 and r.json()["state"] == "paused", r
    pid = qemu_of(sid)
    t0 = vcpu_ticks(pid)
    time.sleep(1.5)
    assert vcpu_ticks(pid) - t0 <= 2, "vCPU threads ran while paused"
    r = api.request("POST", f"/v1/sandboxes/{sid}/resume", timeout=OP_TIMEOUT)
    assert r.status == 200 and r.json()["state"] == "running", r
    counter_advances(api, sid, before)
    # The same process (its memory) goes on: it was not restarted.
    ps = api.sh(sid, f"cat /proc/{src['counter_pid']}/cmdline | tr '\\0' ' '")
    assert "while" in ps, ps


def test_snapshot_restore_continues_memory_and_outlives_source(isolad, api, src):
    sid = src["id"]
    before = counter_advances(api, sid, 20)  # far from what a restarted loop would show
    snap = snapshot(api, sid, "mvm-counter")
    assert snap["level"] == "files+memory", snap
    sdir = Path(isolad.state_dir) / "snapshots" / snap["id"]
    for f in ("state", "mem.ram", "disk.qcow2", "vm.json"):
        assert (sdir / f).is_file(), f"snapshot file {f} missing in {sdir}"
    assert (sdir / "mem.ram").stat().st_size == 256 << 20
    t0 = time.monotonic()
    kid = restore(api, "mvm-counter")
    first = api.exec(kid["id"], cmd=["true"])
    restore_s = time.monotonic() - t0
    print(f"microvm restore -> first command: {restore_s:.2f}s")
    assert first["exit_code"] == 0
    try:
        kid_pid = qemu_of(kid["id"])
        assert kid_pid != qemu_of(sid)
        # Same process, same memory: the counter restarts from the snapshot, not from 1.
        v = read_counter(api, kid["id"])
        assert v >= before, (v, before)
        counter_advances(api, kid["id"], v)
        ps = api.sh(kid["id"], f"cat /proc/{src['counter_pid']}/cmdline | tr '\\0' ' '")
        assert "while" in ps, ps
        # Its files are its own: a write in the restore is not in the source.
        api.sh(kid["id"], "echo restored > /root/only-in-kid")
        r = api.exec(sid, cmd=["test", "-e", "/root/only-in-kid"])
        assert r["exit_code"] != 0
    finally:
        api.delete_sandbox(kid["id"])
    assert kid["id"] not in qemu_pids().values()


def test_restore_after_source_destroyed(isolad, api):
    t0 = time.monotonic()
    sb = create_vm(api, memory="256M", cpu=1)
    api.exec(sb["id"], cmd=["true"])
    print(f"microvm cold create -> first command (image cached): {time.monotonic() - t0:.2f}s")
    api.sh(sb["id"], "echo kept > /root/marker")
    counter_loop(api, sb["id"])
    read_counter(api, sb["id"])
    snapshot(api, sb["id"], "mvm-orphan")
    api.delete_sandbox(sb["id"])
    assert sb["id"] not in qemu_pids().values()
    t0 = time.monotonic()
    kid = restore(api, "mvm-orphan")
    api.exec(kid["id"], cmd=["true"])
    print(f"microvm restore -> first command: {time.monotonic() - t0:.2f}s")
    try:
        assert api.sh(kid["id"], "cat /root/marker").strip() == "kept"
        counter_advances(api, kid["id"], read_counter(api, kid["id"]))
    finally:
        api.delete_sandbox(kid["id"])


def test_fork_children_are_independent_with_own_identity(api, src):
    sid = src["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 3}, timeout=OP_TIMEOUT)
    assert r.status == 201, r
    out = r.json()
    kids = [k["id"] for k in out["children"]]
    print(f"microvm fork x3: source paused {out['paused_us']} us")
    try:
        assert len(set(kids)) == 3
        for k in kids:
            api.sh(k, f"echo {k} > /root/who; echo {k} > /dev/shm/who")
        rand, hosts = set(), set()
        for k in kids:
            assert api.sh(k, "cat /root/who /dev/shm/who").split() == [k, k]
            rand.add(api.sh(k, "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"))
            hosts.add(api.sh(k, "hostname").strip())
            # Every child carries the source's processes, running on their own.
            counter_advances(api, k, read_counter(api, k))
        assert len(rand) == 3, f"children share RNG output: {rand}"
        assert hosts == set(kids), hosts
        # The source is untouched by the children's writes.
        assert api.exec(sid, cmd=["test", "-e", "/root/who"])["exit_code"] != 0
        # Host memory per child (reported, not asserted): QEMU's resident set, which
        # includes the guest RAM it touched (the RAM file on its private tmpfs).
        for k in kids:
            rss = [ln for ln in Path(f"/proc/{qemu_of(k)}/status").read_text().splitlines()
                   if ln.startswith("VmRSS")]
            print(f"microvm fork child {k}: QEMU {rss[0].split(':')[1].strip()}")
    finally:
        for k in kids:
            api.delete_sandbox(k)


def test_restore_with_other_shape_is_invalid_naming_both(api, src):
    snapshot(api, src["id"], "mvm-shape")
    before = set(qemu_pids())
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": "mvm-shape", "memory": "512M"},
                    timeout=OP_TIMEOUT)
    assert r.status == 400 and r.error_code == "invalid", r
    assert "256" in r.error_message and "512" in r.error_message, r
    assert set(qemu_pids()) - before == set(), "a QEMU was left behind"


def reseal(sdir, name):
    """Rewrites the manifest entry of `name` to its current size and SHA-256, so the damage
    gets past core's integrity check and reaches the tier (a forged or buggy snapshot)."""
    import hashlib
    import json
    mpath = sdir / "manifest.json"
    m = json.loads(mpath.read_text())
    data = (sdir / name).read_bytes()
    for f in m["files"]:
        if f["name"] == name:
            f["size"] = len(data)
            f["sha256"] = hashlib.sha256(data).hexdigest()
    os.chmod(mpath, 0o600)
    mpath.write_text(json.dumps(m))


@pytest.mark.parametrize("damage", ["state-garbage", "ram-truncated", "meta-shape"])
def test_damaged_snapshot_past_the_manifest_fails_cleanly(isolad, api, src, damage):
    name = f"mvm-bad-{damage}"
    snap = snapshot(api, src["id"], name)
    sdir = Path(isolad.state_dir) / "snapshots" / snap["id"]
    if damage == "state-garbage":
        target, expect = "state", "device state"
        size = (sdir / target).stat().st_size
        os.chmod(sdir / target, 0o600)
        (sdir / target).write_bytes(os.urandom(size))
    elif damage == "ram-truncated":
        target, expect = "mem.ram", "mem.ram"
        os.chmod(sdir / target, 0o600)
        with open(sdir / target, "r+b") as f:
            f.truncate(1 << 20)
    else:
        target, expect = "vm.json", "vm.json"
        os.chmod(sdir / target, 0o600)
        (sdir / target).write_text('{"version":1,"vcpus":"two"}')
    reseal(sdir, target)
    sandboxes = Path(isolad.state_dir) / "sandboxes"
    dirs_before = set(os.listdir(sandboxes))
    qemus_before = set(qemu_pids())
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": name}, timeout=OP_TIMEOUT)
    assert 400 <= r.status < 600 and r.status != 501, r
    assert expect in r.error_message, r
    deadline = time.monotonic() + 20
    while set(qemu_pids()) - qemus_before and time.monotonic() < deadline:
        time.sleep(0.25)
    assert set(qemu_pids()) - qemus_before == set(), "a QEMU was left behind"
    assert set(os.listdir(sandboxes)) - dirs_before == set(), "a sandbox dir was left behind"
    # The source is unharmed.
    counter_advances(api, src["id"], read_counter(api, src["id"]))


def test_kill9_mid_restore_leaves_no_orphan_and_paused_vm_reattaches(isolad, api, src):
    sid = src["id"]
    snapshot(api, sid, "mvm-k9")
    r = api.request("POST", f"/v1/sandboxes/{sid}/pause", timeout=OP_TIMEOUT)
    assert r.status == 200, r
    api2 = kill9_mid_launch(isolad, "restore", lambda: api.request(
        "POST", "/v1/sandboxes", json={"snapshot": "mvm-k9"}, timeout=120))
    # The paused source came back paused, its vCPUs still stopped, and resumes.
    assert api2.get_json(f"/v1/sandboxes/{sid}")["state"] == "paused"
    pid = qemu_of(sid)
    t0 = vcpu_ticks(pid)
    time.sleep(1)
    assert vcpu_ticks(pid) - t0 <= 2, "vCPU threads ran while paused after the restart"
    r = api2.request("POST", f"/v1/sandboxes/{sid}/resume", timeout=OP_TIMEOUT)
    assert r.status == 200 and r.json()["state"] == "running", r
    counter_advances(api2, sid, read_counter(api2, sid))
