# SPDX-License-Identifier: Apache-2.0
"""The filesystem a sandbox sees: /dev holds exactly what it should, Docker's masked paths
(plus /proc/interrupts, powercap, thermal_throttle) are covered and stay covered, /proc's
host knobs and /sys are read-only, no fresh procfs or cgroupfs can be mounted, and the
cgroup v1 release_agent escape (CVE-2022-0492) fails at every step — judged from inside by
the probe and mountinfo, and from the host by the host's own cgroup files."""

import errno
import glob
import json
import os

from seclib import run_probe

# Exactly this, and nothing else, in /dev (the symlinks are the conventional ones programs
# expect: fd, stdin, stdout, stderr -> /proc/self/fd..., ptmx -> pts/ptmx).
DEV_NODES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8),
             "urandom": (1, 9), "tty": (5, 0)}
DEV_DIRS = {"pts", "shm", "mqueue"}
DEV_LINKS = {"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
             "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

# Docker's masked paths (moby oci/defaults.go) + /proc/interrupts.
PROC_MASKED = ["asound", "acpi", "interrupts", "kcore", "keys", "latency_stats", "timer_list",
               "timer_stats", "sched_debug", "scsi"]
PROC_READONLY = ["bus", "fs", "irq", "sys", "sysrq-trigger"]
SYS_MASKED = ["firmware", "devices/virtual/powercap"]

LIST_DEV = r"""
import json, os, stat
out = {}
for n in sorted(os.listdir('/dev')):
    st = os.lstat('/dev/' + n)
    e = {'mode': stat.S_IFMT(st.st_mode)}
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        e['rdev'] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
    if stat.S_ISLNK(st.st_mode):
        e['target'] = os.readlink('/dev/' + n)
    out[n] = e
out['pts/'] = sorted(os.listdir('/dev/pts'))
print(json.dumps(out))
"""


def mountinfo(api, sid):
    """{mount point: (mount options, fs type, super options)} as the sandbox sees it."""
    out = {}
    for line in api.sh(sid, "cat /proc/self/mountinfo").splitlines():
        pre, _, post = line.partition(" - ")
        f = pre.split()
        fstype, _src, sopts = (post.split() + ["", "", ""])[:3]
        out[f[4]] = (f[5].split(","), fstype, sopts)
    return out


def test_dev_holds_exactly_the_allowed_entries(api, sandbox):
    sid = sandbox["id"]
    got = json.loads(api.sh(sid, f"python3 -c \"{LIST_DEV}\""))
    pts = got.pop("pts/")
    assert set(got) == set(DEV_NODES) | DEV_DIRS | set(DEV_LINKS), \
        f"/dev has {sorted(got)}; extra {sorted(set(got) - set(DEV_NODES) - DEV_DIRS - set(DEV_LINKS))}"
    for n, rdev in DEV_NODES.items():
        assert got[n]["mode"] == 0o020000 and got[n]["rdev"] == list(rdev), (n, got[n])
    for n, t in DEV_LINKS.items():
        assert got[n]["mode"] == 0o120000 and got[n]["target"] == t, (n, got[n])
    for n in DEV_DIRS:
        assert got[n]["mode"] == 0o040000, (n, got[n])
    # A private devpts: the host's terminals are not there, only the multiplexer.
    assert pts == ["ptmx"], f"/dev/pts lists {pts}"
    mi = mountinfo(api, sid)
    assert mi["/dev/pts"][1] == "devpts", mi["/dev/pts"]
    # /dev/shm is a size-limited tmpfs of its own (its pages are charged to the sandbox:
    # test_limits.py::test_memory_three_ways).
    assert mi["/dev/shm"][1] == "tmpfs" and "size=" in mi["/dev/shm"][2], mi["/dev/shm"]
    assert "nodev" in mi["/dev"][0] and "nosuid" in mi["/dev"][0], mi["/dev"]
    # /dev/mqueue: the message queues of the sandbox's own ipc namespace (runc's default).
    assert mi["/dev/mqueue"][1] == "mqueue" and "nosuid" in mi["/dev/mqueue"][0], \
        mi["/dev/mqueue"]


def test_masked_paths_are_empty_and_stay_masked(api, sandbox):
    sid = sandbox["id"]
    mi = mountinfo(api, sid)
    checked = []
    for name in PROC_MASKED:
        if not os.path.exists(f"/proc/{name}"):
            continue  # this kernel lacks it: nothing to leak
        p = f"/proc/{name}"
        assert p in mi, f"{p} exists on the host but is not masked inside"
        res = api.exec(sid, cmd=["sh", "-c", f"cat {p} 2>/dev/null | wc -c; ls -A {p} "
                                             f"2>/dev/null | wc -l"])
        assert res["stdout"].split() == ["0", "0"] or \
            res["stdout"].split()[0] == "0", f"{p} shows data inside: {res}"
        checked.append(p)
    sys_paths = [f"/sys/{n}" for n in SYS_MASKED] + \
        [p for p in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")]
    for p in sys_paths:
        if not os.path.exists(p):
            continue
        assert p in mi, f"{p} exists on the host but is not masked inside"
        assert api.sh(sid, f"ls -A {p} | wc -l").strip() == "0", f"{p} lists entries"
        checked.append(p)
    # On hosts with these, the glob above already covered them; in any sandbox, whatever
    # exists under these names must be empty.
    res = api.sh(sid, "for d in /sys/devices/virtual/powercap "
                      "/sys/devices/system/cpu/cpu*/thermal_throttle; do "
                      "[ -e $d ] && ls -A $d; done; true")
    assert res.strip() == "", f"powercap/thermal_throttle entries visible: {res}"
    assert "/proc/interrupts" in checked and "/sys/firmware" in checked, checked
    # The masks cannot be lifted from inside, as root: no CAP_SYS_ADMIN, no umount.
    for p in checked:
        res = api.exec(sid, cmd=["sh", "-c", f"umount {p} 2>&1; umount -l {p} 2>&1; "
                                             f"echo rc=$?"])
        assert "rc=0" not in res["stdout"], (p, res)
    assert mountinfo(api, sid).keys() >= set(checked)


def test_proc_knobs_and_sys_are_read_only(api, sandbox):
    sid = sandbox["id"]
    mi = mountinfo(api, sid)
    for name in PROC_READONLY:
        if not os.path.exists(f"/proc/{name}"):
            continue
        p = f"/proc/{name}"
        assert p in mi and "ro" in mi[p][0], f"{p} not read-only: {mi.get(p)}"
    assert "ro" in mi["/sys"][0], mi["/sys"]
    script = (
        "import errno, sys\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        open(p, 'w').write('1')\n"
        "        print(p, 'WROTE')\n"
        "    except OSError as e:\n"
        "        print(p, errno.errorcode[e.errno])\n")
    targets = ["/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches",
               "/proc/sys/kernel/core_pattern", "/sys/kernel/uevent_helper",
               "/sys/kernel/mm/transparent_hugepage/enabled", "/proc/sysrq-trigger"]
    res = api.exec(sid, cmd=["python3", "-c", script] + targets)
    assert "WROTE" not in res["stdout"], res
    for line in res["stdout"].splitlines():
        p, code = line.split()
        assert code in ("EROFS", "EACCES", "ENOENT", "EPERM"), line


def test_fresh_procfs_cannot_be_mounted(api, sandbox):
    p = run_probe(api, sandbox["id"], "cgroup")
    for name in ("fsopen_proc", "mount_proc"):
        ev = p["syscall"][name]
        assert ev["ret"] == -1 and ev["errno"] == errno.EPERM, ev
    res = api.exec(sandbox["id"], cmd=["sh", "-c", "mkdir -p /tmp/p && mount -t proc proc "
                                                   "/tmp/p 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], res


def host_cgroup_hooks():
    """Every release_agent and the root notify_on_release of the host's v1 hierarchies."""
    out = {}
    for p in sorted(glob.glob("/sys/fs/cgroup/*/release_agent") +
                    glob.glob("/sys/fs/cgroup/release_agent") +
                    glob.glob("/sys/fs/cgroup/*/notify_on_release")):
        try:
            with open(p) as f:
                out[p] = f.read()
        except OSError as e:
            out[p] = f"<{e.errno}>"
    return out


def test_cgroup_release_agent_escape_fails(api, sandbox):
    """CVE-2022-0492, every step: mount cgroup v1 (four ways) or v2, unshare into new user,
    mount and cgroup namespaces first, write notify_on_release and release_agent wherever
    they could be, plus core_pattern, modprobe, uevent_helper and sysrq-trigger."""
    before = host_cgroup_hooks()
    assert before, "test setup: no cgroup v1 hierarchy to judge on this host"
    p = run_probe(api, sandbox["id"], "cgroup")
    events = p["syscall"]["_all"]
    mounts = [e for e in events if e["name"].startswith(("mount_cgroup", "fsopen_cgroup",
                                                         "unshare_userns"))]
    assert len(mounts) == 7, mounts
    for e in mounts:
        assert e["ret"] == -1 and e["errno"] == errno.EPERM, e
    writes = [e for e in events if e["name"].startswith("write_")]
    assert writes, events
    for e in writes:
        assert e["ret"] == -1 and e["errno"] in (errno.ENOENT, errno.EROFS, errno.EACCES,
                                                 errno.EPERM), e
    assert host_cgroup_hooks() == before, "a host cgroup hook changed"
    assert not os.path.exists("/isola-pwn")
    for f in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe"):
        if not os.path.exists(f):
            continue
        with open(f) as fh:
            assert "isola-pwn" not in fh.read(), f


def test_read_only_mounts_cannot_be_made_writable(api, sandbox):
    """The template and binds are attached from trees isolad made, so their read-only flag
    may not be locked by the kernel (docs/process-tier.md, Known limits): what stops a
    remount is that no process inside holds CAP_SYS_ADMIN and seccomp refuses mount and
    mount_setattr. Tried here as root, every way mount(8) offers."""
    sid = sandbox["id"]
    for target in ("/usr", "/sys", "/proc/sys", "/proc/keys", "/etc/ssl/certs"):
        res = api.exec(sid, cmd=["sh", "-c",
                                 f"mount -o remount,rw {target} 2>&1; echo rc=$?; "
                                 f"mount -o remount,rw,bind {target} 2>&1; echo rc=$?; "
                                 f"mount --bind /tmp {target} 2>&1; echo rc=$?"])
        assert "rc=0" not in res["stdout"], (target, res)
    mi = mountinfo(api, sid)
    assert "ro" in mi["/usr"][0] and "ro" in mi["/sys"][0], (mi["/usr"], mi["/sys"])
    res = api.exec(sid, cmd=["sh", "-c", "touch /usr/isola-x 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], res


def test_kernel_filesystems_carry_the_conventional_sources(api, sandbox):
    """mountinfo names each fresh kernel filesystem's source as runc's default spec does
    (proc, sysfs, tmpfs for /dev, devpts, shm): OCI validation (runtime-tools' runtimetest,
    docs/oci.md) compares a container's mounts with its config by them."""
    src = {}
    for line in api.sh(sandbox["id"], "cat /proc/self/mountinfo").splitlines():
        pre, _, post = line.partition(" - ")
        fstype, source = (post.split() + ["", ""])[:2]
        src[pre.split()[4]] = (fstype, source)
    want = {"/proc": ("proc", "proc"), "/sys": ("sysfs", "sysfs"), "/dev": ("tmpfs", "tmpfs"),
            "/dev/pts": ("devpts", "devpts"), "/dev/shm": ("tmpfs", "shm"),
            "/dev/mqueue": ("mqueue", "mqueue")}
    for mp, w in want.items():
        assert src.get(mp) == w, f"{mp}: {src.get(mp)} (want {w})"
