# SPDX-License-Identifier: Apache-2.0
"""Helpers of the fault tests (test_state_faults.py, test_faults.py): a small state filesystem
on a loop device that can be filled, the SDK, and what one sandbox may leave on the host."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
import isola  # noqa: E402  (the SDK users use)

Isolad = ROOT_CONFTEST.Isolad
CLI = ROOT_CONFTEST.CLI


def need_root_tool(tool):
    """Skips outside CI (fails in CI) when not root or `tool` is missing."""
    if os.geteuid() != 0 or not shutil.which(tool):
        why = f"needs root and {tool}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


class SmallFs:
    """An ext4 of `mib` MiB on a loop device, mounted at a short path; no root reserve, so
    what df calls free is all there is. fill() leaves it with no free block; unfill()
    gives the space back. close() unmounts and deletes whatever happened."""

    def __init__(self, mib=64):
        need_root_tool("mkfs.ext4")
        fd, self.img = tempfile.mkstemp(prefix="isola-sf-", suffix=".img", dir="/var/tmp")
        os.close(fd)
        self.mnt = tempfile.mkdtemp(prefix="isola-sf-", dir="/tmp")
        self.mounted = False
        subprocess.run(["truncate", "-s", f"{mib}M", self.img], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", self.img], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["mount", "-o", "loop", self.img, self.mnt], check=True)
        self.mounted = True
        self.filler = os.path.join(self.mnt, "filler")

    def free(self):
        st = os.statvfs(self.mnt)
        return st.f_bavail * st.f_frsize

    def fill(self):
        """Takes every free block: one big preallocated file, then 4 KiB writes until
        ENOSPC (fallocate leaves blocks the allocator keeps for metadata)."""
        with open(self.filler, "ab", buffering=0) as f:
            try:
                if self.free() > 1 << 20:
                    os.posix_fallocate(f.fileno(), f.seek(0, 2), self.free() - (1 << 20))
            except OSError:
                pass
            block = b"\0" * 4096
            while True:
                try:
                    if not f.write(block):
                        break
                except OSError:
                    break
        assert self.free() < 64 * 1024, f"could not fill {self.mnt}: {self.free()} free"

    def unfill(self):
        if os.path.exists(self.filler):
            os.unlink(self.filler)

    def close(self):
        if self.mounted:
            if subprocess.run(["umount", self.mnt], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        if os.path.isdir(self.mnt) and not os.listdir(self.mnt):
            os.rmdir(self.mnt)
        if os.path.exists(self.img):
            os.unlink(self.img)


def sdk(isolad, timeout=60):
    return isola.Client(socket_path=isolad.socket, timeout=timeout)


def cli(isolad, *args, timeout=60):
    return subprocess.run([str(CLI), "--socket", isolad.socket] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout)


_slot_names = {}  # sandbox id -> its network slot's host interface, once seen in its record


def isolad_prefix(state_dir):
    """This isolad's host interface prefix (net.c's table_name: FNV-1a of the state dir)."""
    return "i%04x-" % (ic.isolad_hash(state_dir) >> 16)


def veths(sid, state_dir=None):
    """Host interfaces of the sandbox: a veth named after it (net.c: a 6-byte prefix of this
    isolad, then 9 bytes of the id; a microvm's) or its network slot's (prefix, "_", 8 hex),
    whose name its network record holds: read while the record exists and remembered, so a
    slot left behind after the record went is still found."""
    if state_dir:
        try:
            rec = json.loads(Path(state_dir, "network", f"{sid}.json").read_text())
            if rec.get("interface", "")[6:7] == "_":
                _slot_names[sid] = rec["interface"]
        except (OSError, ValueError):
            pass
    names = os.listdir("/sys/class/net")
    return [n for n in names if (n.startswith("i") and n.endswith("-" + sid[:9])) or
            n == _slot_names.get(sid)]


def slot_links(state_dir):
    """This isolad's network slots on the host (used by sandboxes or ready)."""
    prefix = isolad_prefix(state_dir) + "_"
    return sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefix))


def leftovers(isolad, sid, pids=()):
    """What a gone sandbox still holds: its recorded processes (cgroup_pids), cgroup, veth,
    network record and sandbox dir. Empty when nothing is left."""
    out = []
    alive = [p for p in pids if proc_identity(p[0]) == p]
    if alive:
        out.append(f"processes {[(p[0], proc_name(p[0])) for p in alive]}")
    if ic.cgroup_dirs(sid):
        out.append(f"cgroups {ic.cgroup_dirs(sid)}")
    if veths(sid, isolad.state_dir):
        out.append(f"veths {veths(sid, isolad.state_dir)}")
    for p in (f"network/{sid}.json", f"sandboxes/{sid}"):
        if os.path.exists(os.path.join(isolad.state_dir, p)):
            out.append(f"state/{p}")
    return out


def proc_identity(pid):
    """(pid, start time) of a live, non-zombie process, or None: a recorded pid counts as
    left behind only while this same process runs (pids are reused on a busy host)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return (pid, int(fields[19]))


def proc_name(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def cgroup_pids(sid):
    """(pid, start time) of the processes in the sandbox's cgroups (the ones isolad made
    for it)."""
    pids = set()
    for d in ic.cgroup_dirs(sid):
        for f in glob.glob(os.path.join(d, "**", "cgroup.procs"), recursive=True) + \
                glob.glob(os.path.join(d, "cgroup.procs")):
            try:
                pids.update(int(x) for x in Path(f).read_text().split())
            except OSError:
                pass
    return sorted(filter(None, (proc_identity(p) for p in pids)))


def lock_is_free(isolad):
    """True when no process holds the state dir's flock (isolad stopped cleanly)."""
    import fcntl
    path = os.path.join(isolad.state_dir, "isolad.lock")
    if not os.path.exists(path):
        return True
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
    return True


def own_isolad(prefix):
    """Generator body of a fixture: an isolad on a fresh state dir /tmp/<prefix>XXXX, discarded
    after; its state-dir lock must be free once it stopped, then the dir goes (unless
    ISOLA_KEEP_STATE)."""
    d = Isolad(state_dir=tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield d
    finally:
        d.discard(keep_state=True)
        assert lock_is_free(d), "the state-dir lock is still held after isolad stopped"
        if not os.environ.get("ISOLA_KEEP_STATE"):
            shutil.rmtree(d.state_dir, ignore_errors=True)
