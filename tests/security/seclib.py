# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by tests/security: the static probe, extra isolads started with test hooks,
host canaries watched with inotify, and hostile container images built with tarfile.
(Fixtures that use them are in conftest.py.)

Everything here judges from the host. Every wait is bounded.
"""

import ctypes
import errno
import hashlib
import importlib.util
import io
import json
import os
import shutil
import struct
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import isola_client as ic  # noqa: E402  (tests/integration, put on sys.path by tests/conftest.py)

# tests/conftest.py's Isolad, loaded under a name of its own: both conftest files are
# "conftest" to pytest, which keeps only one of them in sys.modules at a time.
_spec = importlib.util.spec_from_file_location(
    "isola_tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root)

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ISOLA_BUILD") or REPO / "build")
PROBE = BUILD / "tests" / "security" / "isola-probe"
# The ASan tree does not build static binaries; fall back to the normal tree's probe.
if not PROBE.exists():
    PROBE = REPO / "build" / "tests" / "security" / "isola-probe"


# What a sandbox's root holds by default (docs/process-tier.md, "Capabilities"): CHOWN,
# DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE, SYS_CHROOT,
# AUDIT_WRITE, SETFCAP; every process's bounding set.
ROOT_CAPS = sum(1 << c for c in (0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31))
# Never held, whatever cap_add asks: DAC_READ_SEARCH, LINUX_IMMUTABLE, NET_ADMIN, NET_RAW,
# SYS_MODULE, SYS_RAWIO, SYS_PTRACE, SYS_PACCT, SYS_ADMIN, SYS_BOOT, SYS_TIME, SYS_TTY_CONFIG,
# MKNOD, AUDIT_CONTROL, MAC_OVERRIDE, MAC_ADMIN, SYSLOG, WAKE_ALARM, BLOCK_SUSPEND, AUDIT_READ,
# PERFMON, BPF, CHECKPOINT_RESTORE.
NEVER_CAPS = {2: "DAC_READ_SEARCH", 9: "LINUX_IMMUTABLE", 12: "NET_ADMIN", 13: "NET_RAW",
              16: "SYS_MODULE", 17: "SYS_RAWIO", 19: "SYS_PTRACE", 20: "SYS_PACCT",
              21: "SYS_ADMIN", 22: "SYS_BOOT", 25: "SYS_TIME", 26: "SYS_TTY_CONFIG",
              27: "MKNOD", 30: "AUDIT_CONTROL", 32: "MAC_OVERRIDE", 33: "MAC_ADMIN",
              34: "SYSLOG", 35: "WAKE_ALARM", 36: "BLOCK_SUSPEND", 37: "AUDIT_READ",
              38: "PERFMON", 39: "BPF", 40: "CHECKPOINT_RESTORE"}
# What cap_add may grant beyond the default set.
OPT_IN_CAPS = {11: "NET_BROADCAST", 14: "IPC_LOCK", 15: "IPC_OWNER", 23: "SYS_NICE",
               24: "SYS_RESOURCE", 28: "LEASE"}


# ---- the probe ------------------------------------------------------------------------

def install_probe(api, sid, path="/tmp/isola-probe"):
    assert PROBE.exists(), f"probe binary {PROBE} missing: build first"
    api.write_file(sid, path, PROBE.read_bytes(), mode="0755")
    return path


def parse_probe(stdout):
    out = {"status": {}, "syscall": {}, "fd": [], "abi": {}, "session": None, "nofile": None,
           "lines": []}
    for line in stdout.splitlines():
        ev = json.loads(line)
        out["lines"].append(ev)
        kind = ev["probe"]
        if kind == "status":
            k, _, v = ev["line"].partition(":")
            out["status"][k] = v.split()
        elif kind == "syscall":
            out["syscall"].setdefault(ev["name"], ev)
            out["syscall"].setdefault("_all", []).append(ev)
        elif kind == "fd":
            out["fd"].append(ev)
        elif kind == "abi":
            out["abi"][ev["name"]] = ev
        elif kind in ("session", "nofile"):
            out[kind] = ev
    return out


def run_probe(api, sid, *args, user=None, path=None):
    """Runs the probe inside sid (installing it first unless path is given)."""
    path = path or install_probe(api, sid)
    fields = {"user": user} if user else {}
    res = api.exec(sid, cmd=[path] + list(args), timeout=60, **fields)
    assert res["exit_code"] == 0, res
    return parse_probe(res["stdout"])


# ---- extra isolads ---------------------------------------------------------------------

class ExtraIsolad(root.Isolad):
    """An isolad of its own (state dir, sockets) started with test hooks; shut down by
    shutdown(), which fails the test on the same grounds as the session isolad."""

    def shutdown(self):
        """Deletes its sandboxes and built templates, then discard_problems()."""
        if self.alive():
            self.destroy_all_sandboxes()
            c = self.client(timeout=30)
            try:
                for t in ic.item_list(c.get_json("/v1/templates"), "templates"):
                    if t.get("source") != "host":
                        c.request("DELETE", f"/v1/templates/{t['name']}")
            except (OSError, AssertionError):
                pass
        return self.discard_problems(expect_running=True)


# ---- host canaries ---------------------------------------------------------------------

IN_ACCESS, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x1, 0x2, 0x4, 0x8
IN_CLOSE_NOWRITE, IN_OPEN, IN_MOVED_FROM, IN_MOVED_TO = 0x10, 0x20, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_ALL_EVENTS = 0xfff
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000

_libc = ctypes.CDLL(None, use_errno=True)


class Canary:
    """A host directory with a secret file, watched with inotify: any open, read, write,
    create, delete, rename or attribute change of either — from any mount namespace,
    since inotify watches inodes — is recorded. untouched() asserts there was none and
    that contents and listing are unchanged."""

    def __init__(self, base="/tmp"):
        self.dir = tempfile.mkdtemp(prefix="isola-canary-", dir=base)
        self.secret = os.path.join(self.dir, "secret")
        self.token = uuid.uuid4().hex
        with open(self.secret, "w") as f:
            f.write(self.token)
        os.chmod(self.dir, 0o755)
        os.chmod(self.secret, 0o644)
        self.stat = os.stat(self.secret)
        self.listing = sorted(os.listdir(self.dir))
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        self.wds = {}
        for p in (self.dir, self.secret):
            wd = _libc.inotify_add_watch(self.fd, p.encode(), IN_ALL_EVENTS)
            assert wd >= 0, os.strerror(ctypes.get_errno())
            self.wds[wd] = p

    def events(self):
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            off = 0
            while off + 16 <= len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode(errors="replace")
                out.append((self.wds.get(wd, "?"), hex(mask), name))
                off += 16 + n

    def untouched(self, what=""):
        ev = self.events()
        assert not ev, f"{what}: host canary {self.dir} was touched: {ev}"
        with open(self.secret) as f:
            assert f.read() == self.token, f"{what}: canary contents changed"
        assert sorted(os.listdir(self.dir)) == self.listing, \
            f"{what}: canary dir now holds {os.listdir(self.dir)}"
        st = os.stat(self.secret)
        assert (st.st_mtime_ns, st.st_size, st.st_mode, st.st_uid) == \
            (self.stat.st_mtime_ns, self.stat.st_size, self.stat.st_mode, self.stat.st_uid), \
            f"{what}: canary metadata changed"
        # Our own checks above opened it: drain those events.
        self.events()

    def close(self):
        os.close(self.fd)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- hostile images --------------------------------------------------------------------

def tar_entries(entries):
    """entries: dicts with name, and optional type ('file', 'dir', 'symlink', 'hardlink',
    'fifo', 'chr'), data, mode, target, uid, gid. Returns tar bytes (PAX)."""
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
             "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE,
             "blk": tarfile.BLKTYPE}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.type = kinds[e.get("type", "file")]
            ti.mode = e.get("mode", 0o755 if ti.type == tarfile.DIRTYPE else 0o644)
            ti.uid, ti.gid = e.get("uid", 0), e.get("gid", 0)
            ti.mtime = 1700000000
            ti.linkname = e.get("target", "")
            if ti.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                ti.devmajor, ti.devminor = e.get("dev", (1, 3))
            if ti.type == tarfile.REGTYPE:
                data = e.get("data", b"")
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def _sha(b):
    return hashlib.sha256(b).hexdigest()


def docker_archive(layer_entries, env=("PATH=/bin:/usr/bin",)):
    """A one-layer `docker save` tarball whose layer holds layer_entries."""
    layer = tar_entries(layer_entries)
    cfg = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2024-01-01T00:00:00Z",
        "config": {"Env": list(env), "WorkingDir": "/", "Cmd": ["/probe"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + _sha(layer)]},
        "history": [{"created_by": "isola security test"}],
    }).encode()
    d = _sha(layer)
    manifest = json.dumps([{"Config": _sha(cfg) + ".json", "RepoTags": ["isola-sec/x:latest"],
                            "Layers": [f"{d}/layer.tar"]}]).encode()
    return tar_entries([
        {"name": d, "type": "dir"},
        {"name": f"{d}/VERSION", "data": b"1.0"},
        {"name": f"{d}/layer.tar", "data": layer},
        {"name": _sha(cfg) + ".json", "data": cfg},
        {"name": "manifest.json", "data": manifest},
    ])


def base_entries():
    """A minimal root: the static probe as /probe, passwd/group with `user` (1000)."""
    return [
        {"name": "etc", "type": "dir"},
        {"name": "tmp", "type": "dir", "mode": 0o1777},
        {"name": "root", "type": "dir", "mode": 0o700},
        {"name": "home", "type": "dir"},
        {"name": "etc/passwd",
         "data": b"root:x:0:0:root:/root:/probe\nuser:x:1000:1000::/home:/probe\n"},
        {"name": "etc/group", "data": b"root:x:0:\nuser:x:1000:\n"},
        {"name": "probe", "data": PROBE.read_bytes(), "mode": 0o755},
    ]


def import_template(api, name, body, timeout=120):
    """POST /v1/templates?name=NAME; returns the final event (dict) or raises."""
    s = api.stream("POST", "/v1/templates", body=body, query={"name": name},
                   headers={"Content-Type": "application/x-tar"}, kind="ndjson",
                   timeout=timeout)
    with s:
        assert s.status == 200, s.body_if_error()
        events = s.read_all(timeout=timeout)
    assert events and events[-1].get("type") == "done", events
    return events[-1]


def wait_until(pred, timeout, interval=0.05):
    """pred() until truthy or timeout; returns the last value."""
    deadline = time.monotonic() + timeout
    v = pred()
    while not v and time.monotonic() < deadline:
        time.sleep(interval)
        v = pred()
    return v


def errno_name(n):
    return errno.errorcode.get(n, str(n))
