# SPDX-License-Identifier: Apache-2.0
"""Resource limits, each reported to the client as what happened, judged from the host's
cgroupfs: memory exhausted three ways (anonymous -> oom_killed on every path that reports an
exit; tmpfs//dev/shm -> size-capped and charged; page cache -> reclaimed under the limit), a
fork bomb bounded while the host and a neighbour stay responsive, CPU quota as a usage ratio,
writable-layer disk and inode quotas (ENOSPC inside, 507 no_space through the API, the host's
disk used no further than the limit), RLIMIT_NOFILE, and a zombie / setsid-orphan storm that leaves nothing behind.

Covered elsewhere, not repeated here: wall-clock TTL (tests/integration/test_lifecycle.py::
test_ttl_expiry_destroys), output retention with a stalled reader while isolad's RSS stays
flat (tests/integration/test_processes.py::test_output_flood_keeps_isolad_bounded), the
plain exec JSON oom_killed (tests/integration/test_exec.py::test_oom_killed)."""

import glob
import os
import time

import pytest

import isola_client as ic
from seclib import run_probe, wait_until

MiB = 1 << 20
HOG = ["python3", "-c", "b = bytearray(512 << 20); print('survived')"]


def cg_path(sid, name):
    """The host cgroupfs file `name` of sandbox sid (v1: whichever hierarchy has it)."""
    for d in ic.cgroup_dirs(sid):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise AssertionError(f"no {name} for sandbox {sid} in {ic.cgroup_dirs(sid)}")


def cg_read(sid, name):
    with open(cg_path(sid, name)) as f:
        return f.read()


def cg_int(sid, *names):
    """The first of names that exists, as an int (v1 name, v2 name)."""
    for n in names:
        try:
            return int(cg_read(sid, n).split()[0])
        except AssertionError:
            continue
    raise AssertionError(f"none of {names} for {sid}")


def cg_maybe_int(sid, name):
    """name as an int, or None where this cgroup version has no such file."""
    try:
        return int(cg_read(sid, name).split()[0])
    except AssertionError:
        return None


def cg_keyed(sid, name, key):
    for line in cg_read(sid, name).splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return int(v)
    raise AssertionError(f"{name} has no `{key}`")


def oom_kills(sid):
    try:
        return cg_keyed(sid, "memory.oom_control", "oom_kill")
    except AssertionError:
        return cg_keyed(sid, "memory.events", "oom_kill")


# ---- memory -----------------------------------------------------------------------------

def test_oom_reported_on_every_path(api, make_sandbox):
    """Anonymous memory past the limit: the kernel's OOM killer, reported as oom_killed in
    NDJSON and SSE exit events, process wait and a late attach; a plain SIGKILL is not."""
    sid = make_sandbox(memory="64M")["id"]
    for kind in ("ndjson", "sse"):
        with api.stream("POST", f"/v1/sandboxes/{sid}/exec", json={"cmd": HOG, "timeout": 60},
                        kind=kind, timeout=90) as s:
            assert s.status == 200, s.body_if_error()
            ev = s.read_until(lambda e: e.get("type") == "exit", timeout=90)
        assert ev["oom_killed"] is True and ev["signal"] == 9, (kind, ev)
    pid = api.start_process(sid, cmd=HOG)["pid"]
    ex = api.wait_process(sid, pid, timeout=60)
    assert ex["oom_killed"] is True and ex["signal"] == 9, ex
    r = api.request("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output")
    assert r.status == 200 and r.json()["oom_killed"] is True, r
    assert "survived" not in r.json()["stdout"]
    # The kernel's count agrees (judged on the host).
    assert oom_kills(sid) >= 3
    assert cg_int(sid, "memory.max_usage_in_bytes", "memory.peak") <= 64 * MiB
    # A SIGKILL that is not the OOM killer's is not reported as one, on any path.
    res = api.exec(sid, cmd=["sh", "-c", "kill -9 $$"])
    assert res["signal"] == 9 and res["oom_killed"] is False, res
    pid = api.start_process(sid, cmd=["sleep", "60"])["pid"]
    api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal", json={"signal": "KILL"})
    ex = api.wait_process(sid, pid, timeout=30)
    assert ex["signal"] == 9 and ex["oom_killed"] is False, ex
    # The sandbox survives its commands' OOMs.
    assert api.exec(sid, cmd=["echo", "alive"])["stdout"] == "alive\n"


def test_shm_is_size_limited_and_charged(api, make_sandbox):
    """/dev/shm is half the memory limit (ENOSPC past it) and its pages count against the
    sandbox's memory: with /dev/shm full, an allocation that would fit alone is OOM-killed."""
    sid = make_sandbox(memory="128M")["id"]
    base = cg_int(sid, "memory.usage_in_bytes", "memory.current")
    res = api.exec(sid, cmd=["sh", "-c", "dd if=/dev/zero of=/dev/shm/f bs=1M count=200 2>&1; "
                                         "echo rc=$?; du -m /dev/shm/f"], timeout=60)
    assert "No space left" in res["stdout"] and "rc=0" not in res["stdout"], res
    size_mb = int(res["stdout"].split()[-2])
    assert 60 <= size_mb <= 64, res["stdout"]
    charged = cg_int(sid, "memory.usage_in_bytes", "memory.current") - base
    assert charged >= 56 * MiB, f"/dev/shm's {size_mb} MiB not charged ({charged >> 20} MiB)"
    hog = ["python3", "-c", "b = bytearray(96 << 20); print('survived')"]
    res = api.exec(sid, cmd=hog, timeout=60)
    assert res["oom_killed"] is True, res
    api.sh(sid, "rm /dev/shm/f")
    res = api.exec(sid, cmd=hog, timeout=60)
    assert res["oom_killed"] is False and res["stdout"] == "survived\n", res


def big_usr_files(total):
    """Large read-only files under /usr (static libraries first: rarely mapped)."""
    cands = sorted(glob.glob("/usr/lib/llvm-*/lib/*.a") + glob.glob("/usr/lib/x86_64-linux-gnu/*.a"),
                   key=lambda p: -os.path.getsize(p))
    out, n = [], 0
    for p in cands:
        out.append(p)
        n += os.path.getsize(p)
        if n >= total:
            return out
    pytest.skip("not enough large files under /usr to exceed the limit three times")


def test_page_cache_is_bounded_and_reclaimed(api, make_sandbox):
    """Reading three times the memory limit of files: the page cache is charged to the
    sandbox (usage reaches the limit) and reclaimed (no OOM, the reader finishes)."""
    sid = make_sandbox(memory="64M")["id"]
    files = big_usr_files(192 * MiB)
    for p in files:  # out of the host's cache, so the sandbox's reads fault them in
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    def reclaimed():  # pages taken back from the sandbox: v1 total_pgpgout, v2 pgsteal
        for key in ("total_pgpgout", "pgsteal"):
            try:
                return cg_keyed(sid, "memory.stat", key)
            except AssertionError:
                continue
        raise AssertionError("memory.stat has neither total_pgpgout nor pgsteal")

    r0 = reclaimed()
    res = api.exec(sid, cmd=["sh", "-c", "cat \"$@\" | wc -c", "sh"] + files, timeout=120)
    assert res["exit_code"] == 0 and res["oom_killed"] is False, res
    assert int(res["stdout"]) >= 192 * MiB
    peak = cg_int(sid, "memory.max_usage_in_bytes", "memory.peak")
    assert peak <= 64 * MiB, peak
    assert peak >= 56 * MiB, f"page cache was not charged to the sandbox (peak {peak >> 20} MiB)"
    assert reclaimed() > r0, "nothing was reclaimed: the reads did not pass the limit"


# ---- pids -------------------------------------------------------------------------------

BOMB = r"""
import os, time
end = time.time() + 8
while time.time() < end:          # every child runs this loop too: :(){ :|:& };:
    try:
        os.fork()
    except OSError:
        time.sleep(0.005)
"""


def test_fork_bomb_is_bounded_and_host_stays_responsive(api, make_sandbox):
    bomb = make_sandbox(pids=64)
    other = make_sandbox()
    sid = bomb["id"]
    pid = api.start_process(sid, cmd=["python3", "-c", BOMB])["pid"]
    assert wait_until(lambda: cg_int(sid, "pids.current") >= 60, 15), "the bomb never grew"
    peak, worst_exec, worst_timer = 0, 0.0, 0.0
    t_end = time.monotonic() + 4
    while time.monotonic() < t_end:
        peak = max(peak, cg_int(sid, "pids.current"))
        t0 = time.monotonic()
        time.sleep(0.05)  # a host-side timer
        worst_timer = max(worst_timer, time.monotonic() - t0 - 0.05)
        t0 = time.monotonic()
        assert api.exec(other["id"], cmd=["echo", "ok"], timeout=10)["stdout"] == "ok\n"
        worst_exec = max(worst_exec, time.monotonic() - t0)
    assert peak <= 64, f"pids.current reached {peak} with pids.max 64"
    assert cg_keyed(sid, "pids.events", "max") > 0, "no fork was refused"
    assert worst_exec < 5, f"a neighbour's exec took {worst_exec:.1f}s during the bomb"
    assert worst_timer < 1, f"a host timer fired {worst_timer:.2f}s late"
    # Destroy ends it all.
    init = ic.sandbox_init_pid(sid)
    pidns, userns = ic.ns_inode(init, "pid"), ic.ns_inode(init, "user")
    base = ic.uid_map(init)[0][1]
    assert api.delete_sandbox(sid).status == 204
    left = ic.sandbox_leftovers(sid, (base, base + 65536), pidns, userns)
    assert not left, f"processes left after destroy: {left}"
    assert not ic.cgroup_dirs(sid)
    del pid  # the bomb's own process: gone with the sandbox


def test_pids_limit_reported_to_the_command(api, make_sandbox):
    sid = make_sandbox(pids=16)["id"]
    res = api.exec(sid, cmd=["python3", "-c",
                             "import os, errno\n"
                             "try:\n"
                             "    for i in range(64):\n"
                             "        if os.fork() == 0:\n"
                             "            import time; time.sleep(1); os._exit(0)\n"
                             "except OSError as e:\n"
                             "    print(errno.errorcode[e.errno], i)\n"], timeout=30)
    code, n = res["stdout"].split()
    assert code == "EAGAIN" and 8 <= int(n) < 16, res


# ---- cpu --------------------------------------------------------------------------------

def test_cpu_quota_is_a_ratio(api, make_sandbox):
    """cpu: 0.5 with two spinning processes: the cgroup's CPU time over a wall-clock window
    is about half a CPU (at most 0.6), and the scheduler throttled it."""
    sid = make_sandbox(cpu=0.5)["id"]
    for _ in range(2):
        api.start_process(sid, cmd=["python3", "-c", "while True: pass"])

    def usage_ns():
        try:
            return int(cg_read(sid, "cpuacct.usage"))
        except AssertionError:
            return cg_keyed(sid, "cpu.stat", "usage_usec") * 1000

    def throttled():
        return cg_keyed(sid, "cpu.stat", "nr_throttled")

    time.sleep(0.5)
    u0, w0, t0 = usage_ns(), time.monotonic_ns(), throttled()
    time.sleep(3)
    u1, w1, t1 = usage_ns(), time.monotonic_ns(), throttled()
    ratio = (u1 - u0) / (w1 - w0)
    assert ratio <= 0.6, f"cpu 0.5 sandbox used {ratio:.2f} CPUs"
    assert ratio >= 0.1, f"cpu 0.5 sandbox used only {ratio:.2f} CPUs (host too busy?)"
    # What held it back was the quota (on a host too busy to give it half a CPU, the
    # spinners may never reach the quota: then only the upper bound is the claim).
    if ratio > 0.35:
        assert t1 - t0 >= 5, f"throttled {t1 - t0} times in 3 s at {ratio:.2f} CPUs"


# ---- disk and inodes --------------------------------------------------------------------

def host_free(path="/"):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_disk_quota_enospc_and_host_bounded(api, isolad, make_sandbox):
    """The writable layer is an ext4 image on the host's disk (docs/process-tier.md): a
    fill stops at the limit with ENOSPC, and the host's disk is used no further than that."""
    sid = make_sandbox(disk="256M", memory="1G")["id"]
    free0 = min(host_free("/"), host_free(isolad.state_dir))
    res = api.exec(sid, cmd=["sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>&1; "
                                         "echo rc=$?; du -m /tmp/fill"], timeout=120)
    assert "No space left on device" in res["stdout"] and "rc=0" not in res["stdout"], res
    mb = int(res["stdout"].split()[-2])
    assert 240 <= mb <= 256, res["stdout"]
    # Through the API the client is told exactly that: 507 no_space.
    r = api.request("PUT", f"/v1/sandboxes/{sid}/files", body=b"x" * (2 * MiB),
                    query={"path": "/tmp/more"}, timeout=60)
    assert r.status == 507 and r.error_code == "no_space", r
    # Judged from the host through the agent's fd of the layer's root: the filesystem is
    # the limit plus ext4's 2% reserve, and full.
    st = os.statvfs(f"/proc/{ic.sandbox_init_pid(sid)}/fd/3")
    assert st.f_blocks * st.f_frsize <= 256 * MiB * 51 // 50 + MiB, st
    assert st.f_bavail * st.f_frsize < MiB, st
    free1 = min(host_free("/"), host_free(isolad.state_dir))
    # Other jobs on the host write too: the bound is the limit plus slack, not an equality.
    assert free0 - free1 < 256 * MiB + 128 * MiB, \
        f"host disk free space dropped by {(free0 - free1) >> 20} MiB during a 256 MiB fill"
    api.sh(sid, "rm /tmp/fill && echo fits > /tmp/after")


def test_inode_quota(api, make_sandbox):
    sb = make_sandbox()
    sid = sb["id"]
    limit = sb.get("inodes") or 65536
    res = api.exec(sid, cmd=["python3", "-c",
                             "import os, errno\n"
                             "os.mkdir('/tmp/i')\n"
                             "n = 0\n"
                             "try:\n"
                             "    while True:\n"
                             "        open('/tmp/i/%d' % n, 'w').close(); n += 1\n"
                             "except OSError as e:\n"
                             "    print(errno.errorcode[e.errno], n)\n"], timeout=120)
    code, n = res["stdout"].split()
    assert code == "ENOSPC" and limit - 1024 <= int(n) < limit, (limit, res)
    r = api.request("POST", f"/v1/sandboxes/{sid}/fs/mkdir", json={"path": "/tmp/j"})
    assert r.status == 507 and r.error_code == "no_space", r


# ---- open files -------------------------------------------------------------------------

@pytest.mark.parametrize("user", ["root", "user"])
def test_nofile_applied_and_reported(api, sandbox, user):
    nofile = sandbox.get("nofile")
    assert nofile, f"the sandbox does not report its nofile limit: {sandbox}"
    p = run_probe(api, sandbox["id"], "nofile", user=user)["nofile"]
    assert p["soft"] == p["hard"] == nofile, p
    assert p["raise_errno"] == 1, f"RLIMIT_NOFILE could be raised: {p}"
    assert p["errno"] == 24 and nofile - 8 <= p["opened"] <= nofile - 3, p


# ---- zombies and orphans ----------------------------------------------------------------

STORM = r"""
import os, sys, time
for i in range(100):                 # zombies: children that exit, never reaped by us
    if os.fork() == 0:
        os._exit(0)
for i in range(100):                 # setsid orphans: the middle process exits at once
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "600"])
        os._exit(0)
print("ready", flush=True)
time.sleep(600)
"""


def children(ppid):
    """{host pid: state} of every host process whose parent is ppid (zombies included: a
    zombie has left its cgroup's process list, so it is found by parent, and counted by
    pids.current until reaped)."""
    out = {}
    for p in ic.all_pids():
        st = ic.proc_status(p)
        if st and int(st.get("PPid", -1)) == ppid:
            out[p] = st["State"][0]
    return out


def test_zombie_and_orphan_storm_leaves_nothing(api, isolad, make_sandbox):
    sid = make_sandbox(pids=512)["id"]
    init = ic.sandbox_init_pid(sid)
    pidns, userns = ic.ns_inode(init, "pid"), ic.ns_inode(init, "user")
    base = ic.uid_map(init)[0][1]
    pid = api.start_process(sid, cmd=["python3", "-c", STORM])["pid"]
    # agent + storm + 100 zombies + 100 exited middles + 100 sleepers
    assert wait_until(lambda: cg_int(sid, "pids.current") >= 302, 30), cg_int(sid, "pids.current")
    storm = [p for p in ic.sandbox_host_pids(sid) if ic.ns_pid(p) == pid]
    assert len(storm) == 1, storm
    zombies, sleepers = [], []

    def settled():  # every middle process has exited and its sleeper moved to PID 1
        nonlocal zombies, sleepers
        zombies = [p for p, s in children(storm[0]).items() if s == "Z"]
        sleepers = [p for p, s in children(init).items() if s != "Z" and p != storm[0]]
        return len(zombies) >= 200 and len(sleepers) >= 100

    wait_until(settled, 30, interval=0.2)
    assert len(zombies) >= 200, f"{len(zombies)} zombies"
    assert len(sleepers) >= 100, \
        f"only {len(sleepers)} orphans were re-parented to the sandbox's init"
    # The storm's parent dies: its 200 zombies go to PID 1, which must reap them.
    api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal", json={"signal": "KILL"})
    assert wait_until(lambda: cg_int(sid, "pids.current") <= 1 + len(sleepers), 10), \
        f"the sandbox's init left {cg_int(sid, 'pids.current') - 1 - len(sleepers)} zombies"
    assert not [p for p, s in children(init).items() if s == "Z"]
    assert api.exec(sid, cmd=["echo", "ok"])["stdout"] == "ok\n"
    assert api.delete_sandbox(sid).status == 204
    left = ic.sandbox_leftovers(sid, (base, base + 65536), pidns, userns)
    assert not left, f"{len(left)} processes survived destroy: {left}"
    assert not ic.cgroup_dirs(sid)
