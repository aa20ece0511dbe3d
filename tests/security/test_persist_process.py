# SPDX-License-Identifier: Apache-2.0
"""Persistence attacks on the process tier (SECURITY.md "persistence", docs/process-tier.md
"Persistence"): a hostile writable layer snapshotted and restored, a tampered snapshot archive
restored, ENOSPC during a snapshot. Judged from the host (the archive bytes, a canary watched
with inotify, mounts, the freezer state) and from inside the restored sandbox."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

import seclib

SNAP_TIMEOUT = 120
TEN_GB = 10 * 1024 ** 3


def snapshot(api, sid, name, status=201):
    r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": name},
                    timeout=SNAP_TIMEOUT)
    assert r.status == status, f"snapshot {sid} as {name}: {r}"
    return r.json()


def restore(api, name, status=201):
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": name}, timeout=SNAP_TIMEOUT)
    assert r.status == status, f"restore {name}: {r}"
    return r.json()


def snap_dir(isolad, snap):
    d = os.path.join(isolad.state_dir, "snapshots", snap["id"])
    assert os.path.isfile(os.path.join(d, "layer.tar.zst")), os.listdir(os.path.dirname(d))
    return d


def layer_bytes(d):
    """The snapshot's archive, decompressed (plain when it is not zstd)."""
    raw = open(os.path.join(d, "layer.tar.zst"), "rb").read()
    if raw[:4] != b"\x28\xb5\x2f\xfd":
        return raw
    return subprocess.run(["zstd", "-dc"], input=raw, capture_output=True, check=True,
                          timeout=60).stdout


def freezer_state(sid):
    p = f"/sys/fs/cgroup/freezer/isola/{sid}/freezer.state"
    if os.path.exists(p):
        return open(p).read().strip()
    p = f"/sys/fs/cgroup/isola/{sid}/cgroup.freeze"
    return {"1": "FROZEN", "0": "THAWED"}[open(p).read().strip()]


def test_hostile_layer_snapshot_does_not_leak_or_hang_and_restores(isolad, api, make_sandbox):
    """A symlink to /etc/shadow, a setuid file, a FIFO without a writer, a 10 GB sparse file,
    a 0600 file of another user and a hard link: the snapshot finishes quickly, holds no byte
    of the host's /etc/shadow, and the restore is faithful."""
    sid = make_sandbox()["id"]
    api.sh(sid, "set -e; mkdir -p /root/w; cd /root/w;"
                " ln -s /etc/shadow shadow; ln -s ../../../../../../etc/shadow shadow-up;"
                " cp /bin/true suid; chmod 4755 suid;"
                " mkfifo fifo;"
                " truncate -s 10G sparse; printf MID | dd of=sparse bs=1 seek=5368709120"
                " conv=notrunc 2>/dev/null; printf END | dd of=sparse bs=1 seek=10737418237"
                " conv=notrunc 2>/dev/null;"
                " echo linked > h1; ln h1 h2; chmod 1777 /root/w /root", user="root")
    # A file only its owner (1000) may read.
    api.sh(sid, "umask 077; echo s3cret > /root/w/secret", user="1000")
    t0 = time.monotonic()
    snap = snapshot(api, sid, "hostile-layer")
    took = time.monotonic() - t0
    assert took < 60, f"snapshot took {took:.1f}s"
    assert api.get_json(f"/v1/sandboxes/{sid}")["state"] == "running"
    assert freezer_state(sid) == "THAWED"

    d = snap_dir(isolad, snap)
    size = os.path.getsize(os.path.join(d, "layer.tar.zst"))
    assert size < 16 << 20, f"a 10 GB sparse file made a {size}-byte archive"
    body = layer_bytes(d)
    with open("/etc/shadow", "rb") as f:
        for line in f.read().splitlines():
            # Any host shadow line with a hash or a lock field is a leak if present.
            if line and b":" in line and len(line) > 12:
                assert line not in body, "a line of the host's /etc/shadow is in the snapshot"
    assert (os.stat(os.path.join(d, "layer.tar.zst")).st_mode & 0o077) == 0

    new = restore(api, "hostile-layer")["id"]
    out = api.sh(new, "cd /root/w; readlink shadow; readlink shadow-up;"
                      " stat -c '%a %u %g %F' suid secret fifo h1;"
                      " stat -c '%i' h1 h2 | uniq | wc -l;"
                      " stat -c '%s %b' sparse;"
                      " dd if=sparse bs=1 skip=5368709120 count=3 2>/dev/null; echo;"
                      " dd if=sparse bs=1 skip=10737418237 count=3 2>/dev/null; echo",
                 user="root").splitlines()
    assert out[0] == "/etc/shadow" and out[1] == "../../../../../../etc/shadow", out
    assert out[2] == "4755 0 0 regular file", out
    assert out[3] == "600 1000 1000 regular file", out
    assert out[4].endswith("fifo"), out
    assert out[5].startswith("644 0 0"), out
    assert out[6] == "1", f"hard links became separate files: {out}"
    sz, blocks = out[7].split()
    assert int(sz) == TEN_GB and int(blocks) * 512 < 1 << 20, out
    assert out[8] == "MID" and out[9] == "END", out
    # The 0600 file stays unreadable to others in the restored sandbox.
    r = api.exec(new, cmd=["cat", "/root/w/secret"], user="1001")
    assert r["exit_code"] != 0 and "s3cret" not in r["stdout"], r
    assert api.exec(new, cmd=["cat", "/root/w/secret"], user="1000")["stdout"] == "s3cret\n"
    api.delete_sandbox(new)
    api.request("DELETE", "/v1/snapshots/hostile-layer")


def fix_manifest(d, name="layer.tar.zst"):
    """Updates the manifest entry of `name` to the file's new size and SHA-256 (what an
    attacker with write access to the snapshot store would do)."""
    mp = os.path.join(d, "manifest.json")
    m = json.load(open(mp))
    data = open(os.path.join(d, name), "rb").read()
    for f in m["files"]:
        if f["name"] == name:
            f["size"] = len(data)
            f["sha256"] = hashlib.sha256(data).hexdigest()
    with open(mp, "w") as f:
        json.dump(m, f)


def test_tampered_archive_restores_nothing_outside(isolad, api, make_sandbox, canary):
    """Path traversal crafted by hand into the snapshot's archive (manifest fixed up so the
    integrity check passes): the restore is refused, nothing is written outside, nothing is
    left behind."""
    sid = make_sandbox()["id"]
    api.sh(sid, "echo hi > /root/hi")
    snap = snapshot(api, sid, "to-tamper")
    d = snap_dir(isolad, snap)
    victim = os.path.join(canary.dir, "pwned")
    hostile = [
        [{"name": ".", "type": "dir"}, {"name": "../../../../../../.." + victim}],
        [{"name": ".", "type": "dir"}, {"name": victim}],
        [{"name": ".", "type": "dir"}, {"name": "esc", "type": "symlink", "target": canary.dir},
         {"name": "esc/pwned"}],
        [{"name": ".", "type": "dir"}, {"name": "up", "type": "symlink",
                                        "target": "../../../../../../.."},
         {"name": "up" + victim}],
        [{"name": ".", "type": "dir"}, {"name": "hl", "type": "hardlink",
                                        "target": canary.secret}],
        [{"name": ".", "type": "dir"}, {"name": "null", "type": "chr", "dev": (1, 3)}],
    ]
    before = {s["id"] for s in api.list_sandboxes()}
    for entries in hostile:
        tarb = seclib.tar_entries(entries + [{"name": ".", "type": "dir"}])
        with open(os.path.join(d, "layer.tar.zst"), "wb") as f:
            f.write(tarb)
        fix_manifest(d)
        r = api.request("POST", "/v1/sandboxes", json={"snapshot": "to-tamper"},
                        timeout=SNAP_TIMEOUT)
        assert r.status == 400 and r.json()["code"] == "invalid", (entries, r)
        assert "layer.tar.zst" in r.error_message, r
        canary.untouched(f"restore of {entries[1]['name']}")
        assert {s["id"] for s in api.list_sandboxes()} == before
    # Unfixed manifest: refused by the integrity check before the tier reads a byte.
    with open(os.path.join(d, "layer.tar.zst"), "ab") as f:
        f.write(b"x")
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": "to-tamper"},
                    timeout=SNAP_TIMEOUT)
    assert r.status == 400, r
    canary.untouched("restore with a bad manifest")
    api.request("DELETE", "/v1/snapshots/to-tamper")


def test_truncated_archive_is_refused_naming_the_file(isolad, api, make_sandbox):
    sid = make_sandbox()["id"]
    api.sh(sid, "head -c 2000000 /dev/urandom > /root/blob")
    snap = snapshot(api, sid, "to-cut")
    d = snap_dir(isolad, snap)
    p = os.path.join(d, "layer.tar.zst")
    data = open(p, "rb").read()
    for cut in (len(data) // 3, len(data) - 7):
        with open(p, "wb") as f:
            f.write(data[:cut])
        fix_manifest(d)
        before = {s["id"] for s in api.list_sandboxes()}
        r = api.request("POST", "/v1/sandboxes", json={"snapshot": "to-cut"},
                        timeout=SNAP_TIMEOUT)
        assert r.status == 400 and "layer.tar.zst" in r.error_message, r
        assert {s["id"] for s in api.list_sandboxes()} == before
    api.request("DELETE", "/v1/snapshots/to-cut")


@pytest.fixture
def tiny_snapshot_dir():
    d = tempfile.mkdtemp(prefix="isola-tinysnap-", dir="/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d], check=True)
    yield d
    subprocess.run(["umount", "-l", d], check=False)
    shutil.rmtree(d, ignore_errors=True)


def test_enospc_during_snapshot_is_no_space_and_sandbox_keeps_running(extra_isolad,
                                                                       tiny_snapshot_dir):
    d = extra_isolad(extra_args=["--snapshot-dir", tiny_snapshot_dir])
    api = d.client()
    sid = api.create_sandbox()["id"]
    try:
        api.sh(sid, "head -c 4000000 /dev/urandom > /root/blob")
        r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": "full"},
                        timeout=SNAP_TIMEOUT)
        assert r.status == 507 and r.json()["code"] == "no_space", r
        sb = api.get_json(f"/v1/sandboxes/{sid}")
        assert sb["state"] == "running", sb
        assert freezer_state(sid) == "THAWED"
        assert api.sh(sid, "wc -c < /root/blob").strip() == "4000000"
        # Nothing of the failed snapshot is left on the small filesystem.
        left = [e for e in os.listdir(tiny_snapshot_dir) if e != "lost+found"]
        assert not any(os.listdir(os.path.join(tiny_snapshot_dir, e)) for e in left
                       if os.path.isdir(os.path.join(tiny_snapshot_dir, e))), left
    finally:
        api.delete_sandbox(sid)


def test_pause_freezes_the_cgroup_and_resume_thaws(api, make_sandbox):
    sid = make_sandbox()["id"]
    r = api.request("POST", f"/v1/sandboxes/{sid}/pause")
    assert r.status == 200, r
    assert freezer_state(sid) == "FROZEN"
    r = api.request("POST", f"/v1/sandboxes/{sid}/resume")
    assert r.status == 200, r
    assert freezer_state(sid) == "THAWED"
    assert api.sh(sid, "echo alive").strip() == "alive"
