# SPDX-License-Identifier: Apache-2.0
"""The process tier's writable layer is disk, not memory (issue 12 §5): an ext4 image on the
host's disk under the state dir, ENOSPC at --disk whatever --memory is, nothing left behind
(loop device, image) after destroy, a failed create or an isolad kill -9; and an exec's
oom_killed comes from the cgroup's OOM-kill counter, not the exit status alone (API, CLI)."""

import glob
import os
import re
import subprocess
import time

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

pytestmark = pytest.mark.tiers("process")

MiB = 1 << 20
LAYER_SLOTS = 4  # isolad --layer-slots' default


def layer_loop(sid):
    """The loop device behind the sandbox's writable layer, judged from the host: the agent's
    fd 3 is the layer's root, whose device number names /sys/dev/block/<maj>:<min>. Returns
    loop_id() of it, or None when the layer is not on a loop device."""
    init = ic.sandbox_init_pid(sid)
    dev = os.stat(f"/proc/{init}/fd/3").st_dev
    name = os.path.basename(os.readlink(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    return loop_id(name) if name.startswith("loop") else None


def sysfs(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def loop_id(dev):
    """(device, disk sequence number, backing file) of a bound loop device, else None. The
    kernel gives every binding a new diskseq, so the pair tells this binding from a later one
    of the same device; sysfs shows the nameless image as `<dir>/#<ino> (deleted)`."""
    seq, b = sysfs(f"/sys/block/{dev}/diskseq"), sysfs(f"/sys/block/{dev}/loop/backing_file")
    return (dev, seq, b) if seq and b else None


def held(loops):
    """Those of the loop_id()s whose binding is still there."""
    return [lp for lp in loops if lp and loop_id(lp[0]) == lp]


def wait_released(loops, timeout=30):
    """The kernel detaches an auto-clearing loop device shortly after the last unmount."""
    deadline = time.monotonic() + timeout
    while held(loops) and time.monotonic() < deadline:
        time.sleep(0.2)
    return held(loops)


def loops_in(d):
    """loop_id() of every loop device whose image lies under directory d."""
    out = []
    for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
        lp = loop_id(bf.split("/")[3])
        if lp and lp[2].startswith(d.rstrip("/") + "/"):
            out.append(lp)
    return out


def live_loops(api):
    """loop_id() of the layers of the running process sandboxes."""
    out = set()
    for s in api.request("GET", "/v1/sandboxes").json()["sandboxes"]:
        try:
            out.add(layer_loop(s["id"]))
        except (OSError, AssertionError, KeyError, ValueError):
            continue
    return out


def metric(api, name):
    for line in api.request("GET", "/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} missing from /metrics")


def upper_fs(sid):
    """What the agent's fd 3 (the writable layer's root) is on, judged from the host."""
    init = ic.sandbox_init_pid(sid)
    st = os.statvfs(f"/proc/{init}/fd/3")
    return st


def test_disk_is_disk_not_memory(api, isolad, make_sandbox):
    """--memory 256M --disk 2G: dd of 2100 MiB gets ENOSPC at about 2 GiB, is not OOM-killed,
    and the data is on the host's disk, not in the sandbox's memory."""
    sid = make_sandbox(memory="256M", disk="2G")["id"]
    res = api.exec(sid, cmd=["sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=2100 2>&1; "
                                         "echo rc=$?; du -m /tmp/fill"], timeout=600)
    out = res["stdout"]
    assert "No space left on device" in out and "rc=0" not in out, res
    assert res["oom_killed"] is False and res["signal"] == 0, res
    assert layer_loop(sid), "no loop device backs the sandbox's writable layer"
    mb = int(out.split()[-2])
    assert 2040 <= mb <= 2048, out
    # Disk stats count it (the ext4's own fstatfs).
    st = api.request("GET", f"/v1/sandboxes/{sid}/stats").json()
    assert st["disk_bytes"] >= 2000 * MiB, st
    # Freed space is usable again.
    api.sh(sid, "rm /tmp/fill && echo fits > /tmp/after")
    assert api.sh(sid, "cat /tmp/after") == "fits\n"


def test_disk_4g_with_256m_memory(api, make_sandbox):
    """The issue's case: --memory 256M --disk 4G holds 4 GiB of files. fallocate reserves most
    of it without writing (a 4 GiB dd is too much I/O for a shared CI host), then dd writes
    real blocks past the end and gets ENOSPC."""
    sid = make_sandbox(memory="256M", disk="4G")["id"]
    res = api.exec(sid, cmd=["sh", "-c", "fallocate -l 3900M /tmp/a && "
                                         "dd if=/dev/zero of=/tmp/b bs=1M count=400 2>&1; "
                                         "echo rc=$?; du -m /tmp/a /tmp/b"], timeout=600)
    out = res["stdout"]
    assert "No space left on device" in out and "rc=0" not in out, res
    assert res["oom_killed"] is False, res
    lines = out.split()
    total = int(lines[-4]) + int(lines[-2])
    assert 4080 <= total <= 4098, out  # du -m rounds each file up


def test_layer_lives_on_an_image_not_tmpfs(api, make_sandbox):
    """Judged from the host: the agent's fd of the writable layer's root is on a filesystem
    of --disk's size (an ext4 of 512 MiB), not a tmpfs, and the sandbox's files there do not
    raise its memory usage past what the page cache may keep."""
    sid = make_sandbox(memory="128M", disk="512M")["id"]
    st = upper_fs(sid)
    size = st.f_blocks * st.f_frsize
    assert 512 * MiB <= size <= 532 * MiB, size
    # The loop device reads and writes the image with direct I/O: no second copy of the
    # sandbox's data in the host's page cache.
    dev = layer_loop(sid)[0]
    with open(f"/sys/block/{dev}/loop/dio") as f:
        assert f.read().strip() == "1", dev
    res = api.exec(sid, cmd=["sh", "-c", "dd if=/dev/urandom of=/tmp/f bs=1M count=300 2>&1; "
                                         "echo rc=$?"], timeout=300)
    assert "rc=0" in res["stdout"] and res["oom_killed"] is False, res


def test_each_sandbox_its_own_loop_device(api, make_sandbox):
    """Twelve sandboxes at once (more than the 8 loop devices a host starts with), half of
    them with the default disk (layers made ahead, then made on the spot once none is ready):
    each has its own loop device and its own files."""
    sids = [make_sandbox(**({"disk": "32M"} if i % 2 else {}))["id"] for i in range(12)]
    devs = [layer_loop(s) for s in sids]
    assert all(devs), devs
    assert len({d[0] for d in devs}) == 12, devs
    for s in sids:
        api.sh(s, f"echo {s} > /tmp/me")
    for s in sids:
        assert api.sh(s, "cat /tmp/me") == f"{s}\n"


def test_doctor_says_where_the_layer_is(api):
    doc = api.request("GET", "/v1/doctor").json()["writable_layer_on_disk"]
    assert doc["ok"] is True and "ext4 image" in doc["isola"], doc


def test_nothing_left_after_destroy_failed_create_and_kill9(api, isolad, make_sandbox):
    """The loop device and its image go with the sandbox: after destroy, after isolad was
    killed with SIGKILL and restarted (the sandbox runs on, then is destroyed; the layers the
    killed isolad had made ahead go with it), and when a create fails."""
    for fields in ({"disk": "64M"}, {}):  # made on the spot; taken from those made ahead
        sid = make_sandbox(**fields)["id"]
        api.sh(sid, "head -c 10000000 /dev/urandom > /tmp/x")
        lp = layer_loop(sid)
        assert lp
        assert api.delete_sandbox(sid).status == 204
        left = wait_released([lp])
        assert not left, f"loop devices left after destroy: {left}"

    sid = make_sandbox()["id"]
    api.sh(sid, "echo before > /tmp/f")
    lp = layer_loop(sid)
    ic.wait_for(lambda: metric(api, "isola_layer_slots_ready") == LAYER_SLOTS, 30,
                what="the default layers ready")
    live = live_loops(api)
    assert lp in live
    ready = [x for x in loops_in(os.path.join(isolad.state_dir, "layers")) if x not in live]
    assert len(ready) == LAYER_SLOTS, ready
    isolad.restart(kill9=True)
    api = isolad.client()
    left = wait_released(ready)
    assert not left, f"the killed isolad's ready layers still hold loop devices: {left}"
    assert api.sh(sid, "cat /tmp/f") == "before\n"
    assert held([lp]), "the running sandbox's layer went with the killed isolad"
    st = api.request("GET", f"/v1/sandboxes/{sid}/stats").json()
    assert st["disk_bytes"] > 0, st
    assert api.delete_sandbox(sid).status == 204
    left = wait_released([lp])
    assert not left, f"loop devices left after kill -9, restart and destroy: {left}"

    # A create that fails after the image was made (a disk larger than ext4's 16 TiB files
    # can hold on the host) says why and leaves no loop device and no file: every loop
    # device of this isolad's is a live sandbox's or a layer made ahead.
    r = api.request("POST", "/v1/sandboxes", json={"tier": "process", "disk": 64 << 40})
    assert r.status == 400 and "writable layer image" in r.error_message, r
    ic.wait_for(lambda: metric(api, "isola_layer_slots_ready") == LAYER_SLOTS, 30,
                what="the default layers ready")
    live = live_loops(api)
    strays = [x for x in loops_in(isolad.state_dir) if x not in live]
    assert len(strays) == LAYER_SLOTS, strays
    assert all(b.startswith(os.path.join(isolad.state_dir, "layers") + "/")
               for _, _, b in strays), strays
    assert not glob.glob(os.path.join(isolad.state_dir, "sandboxes", "*", ".disk.img"))


@pytest.fixture
def layerd():
    """layerd(n): an isolad of its own with --layer-slots n (stopped after the test)."""
    made = []

    def start(n):
        d = ROOT_CONFTEST.Isolad(extra_args=["--layer-slots", str(n)])
        made.append(d)
        return d

    yield start
    for d in made:
        if not d.alive():
            d.start()
        d.discard()


def test_layers_made_ahead_taken_once_and_gone_with_isolad(layerd):
    """--layer-slots 3: three default layers wait ready (images nameless in <state>/layers);
    a default create takes one (its device is one that was ready) and gets it fresh and its
    own; another size is made on the spot in the sandbox's dir; the filler makes a new one
    behind each take; when isolad is killed the ready ones leave no loop device, while the
    running sandboxes keep theirs."""
    d = layerd(3)
    c = d.client()
    layers = os.path.join(d.state_dir, "layers")
    ic.wait_for(lambda: metric(c, "isola_layer_slots_ready") == 3 and len(loops_in(layers)) == 3,
                30, what=f"3 layers ready: {loops_in(layers)}")
    ready = set(loops_in(layers))
    a = c.create_sandbox()["id"]
    la = layer_loop(a)
    assert la in ready, (la, ready)  # taken from the pool, not made on the spot
    # Fresh and the sandbox's own: its root's owner is the sandbox's root, nothing in it but
    # what setup made (no lost+found, nothing of another sandbox).
    c.sh(a, "echo mine > /secret")
    ic.wait_for(lambda: metric(c, "isola_layer_slots_ready") == 3, 30, what="refilled")
    b = c.create_sandbox()["id"]
    lb = layer_loop(b)
    assert lb in set(loops_in(layers)) and lb != la, (lb, la)
    assert c.exec(b, cmd=["cat", "/secret"])["exit_code"] != 0
    init = ic.sandbox_init_pid(b)
    root = os.stat(f"/proc/{init}/fd/3")
    assert root.st_uid != 0 and root.st_uid == os.stat(f"/proc/{init}").st_uid, root
    assert "lost+found" not in os.listdir(f"/proc/{init}/fd/3")
    other = c.create_sandbox(disk="64M")["id"]
    lo = layer_loop(other)
    assert f"/sandboxes/{other}/" in lo[2], lo
    text = c.request("GET", "/metrics").body.decode()
    assert 'isola_layer_slots_creates_total{from="ready"} 2' in text, text
    ic.wait_for(lambda: metric(c, "isola_layer_slots_ready") == 3, 30, what="refilled")
    spare = [x for x in loops_in(layers) if x not in (la, lb)]
    assert len(spare) == 3, spare
    d.stop(kill9=True)
    left = wait_released(spare)
    assert not left, f"ready layers of a killed isolad still hold loop devices: {left}"
    assert len(held([la, lb, lo])) == 3, "a running sandbox lost its layer with isolad"
    d.start()
    c = d.client()
    assert c.sh(a, "cat /secret") == "mine\n"
    for s in (a, b, other):
        assert c.delete_sandbox(s).status == 204
    assert not wait_released([la, lb, lo])
    ic.wait_for(lambda: metric(c, "isola_layer_slots_ready") == 3, 30, what="refilled")
    assert d.stop() == 0
    left = wait_released(loops_in(d.state_dir))
    assert not left, f"a stopped isolad left loop devices: {left}"


def test_layer_slots_zero_makes_each_layer_at_create(layerd):
    """--layer-slots 0: nothing is made ahead, a default create makes its layer on the spot
    (its image in the sandbox's dir), which works the same and goes with its sandbox; a bad
    value is refused by name."""
    d = layerd(0)
    c = d.client()
    assert metric(c, "isola_layer_slots_ready") == 0
    assert not loops_in(os.path.join(d.state_dir, "layers"))
    sid = c.create_sandbox()["id"]
    lp = layer_loop(sid)
    assert f"/sandboxes/{sid}/" in lp[2], lp
    assert c.sh(sid, "echo ok > /f && cat /f") == "ok\n"
    text = c.request("GET", "/metrics").body.decode()
    assert 'isola_layer_slots_creates_total{from="inline"} 1' in text, text
    assert c.delete_sandbox(sid).status == 204
    assert not wait_released([lp])
    p = subprocess.run([str(ROOT_CONFTEST.ISOLAD), "--layer-slots", "65"], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "--layer-slots `65` is not 0-64" in p.stderr, p.stderr


def test_files_survive_pause_hibernate_and_snapshot(api, make_sandbox):
    """The writable layer on disk keeps its files through pause/resume, hibernate/resume and
    snapshot/restore (the layer is serialised, never the image re-mounted)."""
    sid = make_sandbox(memory="128M", disk="256M")["id"]
    lp = layer_loop(sid)
    api.sh(sid, "head -c 150000000 /dev/zero > /tmp/big && echo kept > /tmp/small")
    assert api.request("POST", f"/v1/sandboxes/{sid}/pause").status in (200, 204)
    assert api.request("POST", f"/v1/sandboxes/{sid}/resume").status in (200, 204)
    assert api.sh(sid, "cat /tmp/small") == "kept\n"
    r = api.request("POST", f"/v1/sandboxes/{sid}/hibernate", timeout=300)
    assert r.status in (200, 202, 204), r
    assert not wait_released([lp]), "a hibernated sandbox still holds a loop device"
    r = api.request("POST", f"/v1/sandboxes/{sid}/resume", timeout=300)
    assert r.status in (200, 204), r
    assert api.sh(sid, "cat /tmp/small; stat -c %s /tmp/big") == "kept\n150000000\n"
    assert layer_loop(sid), "the resumed sandbox's layer is not on a loop device"


def test_oom_killed_for_a_child_of_the_command(api, make_sandbox):
    """A shell that survives its child's OOM kill exits 0, and the exec still says
    oom_killed in the API's JSON."""
    sid = make_sandbox(memory="256M")["id"]
    sh = "python3 -c 'x = bytearray(600 << 20)'; echo rc=$?"
    res = api.exec(sid, cmd=["sh", "-c", sh], timeout=120)
    assert res["exit_code"] == 0 and "rc=137" in res["stdout"], res
    assert res["oom_killed"] is True, res
    # A command that ends well right after is not OOM.
    assert api.exec(sid, cmd=["true"])["oom_killed"] is False


def test_oom_killed_cli_human_output(cli, make_sandbox):
    """`isola exec` says why on stderr: "killed: out of memory (limit 256M)"; its exit status
    stays the command's own."""
    sid = make_sandbox(memory="256M")["id"]
    sh = "python3 -c 'x = bytearray(600 << 20)'; echo rc=$?"
    cp = cli("exec", sid, "--", "sh", "-c", sh, timeout=120)
    err = cp.stderr.decode()
    assert cp.returncode == 0, (cp.returncode, err)
    assert "killed: out of memory (limit 256M)" in err, err
    cp = cli("exec", sid, "--", "true")
    assert "out of memory" not in cp.stderr.decode()


def test_fallback_to_tmpfs_without_mke2fs_says_so():
    """A host without mke2fs (here: isolad's PATH without /usr/sbin) still creates sandboxes:
    the writable layer falls back to a tmpfs of the same size, and the log says that it is
    memory now."""
    d = ROOT_CONFTEST.Isolad(extra_env={"PATH": "/usr/bin:/bin"})
    try:
        api = d.client()
        r = api.request("POST", "/v1/sandboxes", json={"tier": "process", "disk": "64M"})
        assert r.status == 201, r
        sid = r.json()["id"]
        init = ic.sandbox_init_pid(sid)
        fs = subprocess.run(["stat", "-f", "-c", "%T", f"/proc/{init}/fd/3"],
                            capture_output=True, text=True).stdout.strip()
        assert fs == "tmpfs", fs
        assert "its writable layer is a tmpfs (memory, charged to its memory limit)" in \
            d.log_text()
        assert "install e2fsprogs" in d.log_text()
        assert api.sh(sid, "echo ok > /tmp/f && cat /tmp/f") == "ok\n"
        doc = api.request("GET", "/v1/doctor").json()["writable_layer_on_disk"]
        assert doc["ok"] is False and "mke2fs" in doc["detail"] and "tmpfs" in doc["isola"], doc
        assert api.delete_sandbox(sid).status == 204
    finally:
        d.discard()


def layer_unwritten(sid):
    """Bytes the sandbox wrote to its layer that are still only in memory, judged on the
    host: its ext4's delayed-allocation blocks (4 KiB each)."""
    dev = layer_loop(sid)[0]
    return int(sysfs(f"/sys/fs/ext4/{dev}/delayed_allocation_blocks")) * 4096


def layer_releases(api):
    text = api.request("GET", "/metrics").body.decode()
    return {w: int(re.search(rf'^isola_layer_releases_total{{writes="{w}"}} (\d+)$', text,
                             re.M).group(1)) for w in ("dropped", "kept")}


def test_destroy_shuts_the_layer_down_only_when_it_pays(layerd):
    """Destroy shuts a layer's ext4 down first (EXT4_IOC_SHUTDOWN: its unwritten pages are
    dropped, not written to an image about to go, at the price of a KERN_ALERT console line)
    only when it holds 8 MiB or more not yet written: a sandbox that wrote a line is
    unmounted as it is, one that just wrote 32 MiB is shut down. An isolad of its own, so
    no other test's destroy lands in the counts."""
    d = layerd(LAYER_SLOTS)
    api = d.client()
    for script, wrote_much, which in (("echo hi > /tmp/small", False, "kept"),
                                      ("head -c 33554432 /dev/zero > /tmp/big", True,
                                       "dropped")):
        sid = api.create_sandbox()["id"]
        api.sh(sid, script)
        unwritten = layer_unwritten(sid)
        assert (unwritten >= 8 * MiB) == wrote_much, (script, unwritten)
        lp = layer_loop(sid)
        before = layer_releases(api)
        assert api.delete_sandbox(sid).status == 204
        # The release (shutdown or not, then the unmount) runs behind the answer.
        ic.wait_for(lambda: sum(layer_releases(api).values()) == sum(before.values()) + 1, 30,
                    what=f"the layer of {sid} released")
        after = layer_releases(api)
        assert after[which] == before[which] + 1, (script, before, after)
        assert not wait_released([lp]), f"loop device left after destroy: {lp}"
