# SPDX-License-Identifier: Apache-2.0
"""A full state filesystem and a read-only database (docs/persistence.md "When the state
filesystem is full or read-only", docs/compliance.md "Gaps"): an operation is acknowledged
only once its record is written, otherwise the client hears 507 (full) or 503 (read-only)
naming the cause and the sandbox is left as the store says; isolad starts on a full state
filesystem, re-attaches its sandboxes and refuses what needs space; the audit trail states
the appends it lost as a chained `audit.gap` record and still verifies.

The state dir is a 64 MiB ext4 on a loop device made here (root, e2fsprogs), unmounted and
deleted whatever happens. Process tier only: the behaviour under test is the store's, not
a tier's.
"""

import os
import subprocess

import pytest

import isola_client as ic
from faults_util import Isolad, SmallFs, cli, isola, leftovers, need_root_tool, sdk


@pytest.fixture
def small_fs():
    fs = SmallFs(64)
    try:
        yield fs
    finally:
        fs.close()


@pytest.fixture
def fsd(small_fs):
    """An isolad whose --state-dir is the small filesystem. No writable layers made ahead
    (--layer-slots 0): the filler writes and deletes layer images in the state dir behind the
    test's back, so a fill could be undone a moment later (CI: `isola rm` was recorded after
    the filler gave back the room of a layer it could not finish)."""
    d = Isolad(state_dir=small_fs.mnt, extra_args=["--layer-slots", "0"])
    try:
        yield d
    finally:
        small_fs.unfill()
        d.discard(keep_state=True)  # the small filesystem's mount point: small_fs's


def state_of(c, sid):
    return c.get_sandbox(sid).info.state


def test_full_state_fs_refuses_with_507_and_restarts(small_fs, fsd):
    c = sdk(fsd)
    sb = c.create_sandbox(tier="process")
    sid = sb.id
    sb.files.write("/tmp/kept.txt", "written before the disk filled\n")
    small_fs.fill()

    # rm: refused, named, and the sandbox is exactly as before.
    cp = cli(fsd, "rm", sid)
    assert cp.returncode != 0, f"`isola rm` acknowledged a destroy it could not record: {cp}"
    assert "ENOSPC" in cp.stderr and "still running" in cp.stderr, cp.stderr
    with pytest.raises(isola.errors.NoSpaceError) as ei:
        c.delete_sandbox(sid)
    assert ei.value.status == 507 and "full" in str(ei.value), ei.value
    assert state_of(c, sid) == "running"
    assert sb.exec("cat /tmp/kept.txt").stdout == "written before the disk filled\n"
    # pause: the same rule.
    with pytest.raises(isola.errors.NoSpaceError):
        sb.pause()
    assert state_of(c, sid) == "running"
    # create: needs space, refused with 507.
    with pytest.raises(isola.errors.NoSpaceError) as ei:
        c.create_sandbox(tier="process")
    assert ei.value.status == 507, ei.value

    # A restart on the still-full filesystem: isolad starts and re-attaches the sandbox.
    fsd.stop()
    small_fs.fill()  # whatever the stop gave back: the case is a start on a full filesystem
    fsd.start()
    c = sdk(fsd)
    assert state_of(c, sid) == "running", fsd.log_text()[-3000:]
    assert sb.exec("cat /tmp/kept.txt").stdout == "written before the disk filled\n"
    with pytest.raises(isola.errors.NoSpaceError):
        c.create_sandbox(tier="process")

    # Space again: the trail states what it lost, and it verifies.
    small_fs.unfill()
    c.list_sandboxes()  # any audited request writes the pending gap first...
    # ...when the request completes, which may be just after its reply: wait for it.
    try:
        ic.wait_for(lambda: c.audit_verify()["gaps"], 15, what="the audit.gap record")
    except AssertionError:
        pass  # judged below, with what isolad said
    v = c.audit_verify()
    assert v["ok"], v
    audit_log = [ln for ln in fsd.log_text().splitlines() if "audit" in ln]
    assert v["gaps"], f"no audit.gap record after appends failed: {v}; " \
        f"audit dir {sorted(os.listdir(os.path.join(small_fs.mnt, 'audit')))}; " \
        f"isolad said: {audit_log[-15:]}"
    assert all(g["lost"] >= 1 and "No space" in g["reason"] for g in v["gaps"]), v["gaps"]
    gap_seqs = {g["seq"] for g in v["gaps"]}
    gaps = [r for r in c.audit_export() if r.get("action") == "audit.gap"]  # the record itself
    assert {r["seq"] for r in gaps} == gap_seqs, gaps

    # And now the destroy is acknowledged because it is recorded: after a restart the
    # sandbox stays gone and left nothing.
    c.delete_sandbox(sid)
    fsd.stop()
    fsd.start()
    c = sdk(fsd)
    assert sid not in [s.id for s in c.list_sandboxes()]
    assert not leftovers(fsd, sid), leftovers(fsd, sid)


def test_read_only_database_refuses_with_503(small_fs, fsd):
    """The database's files made immutable (chattr +i: writes through isolad's open
    descriptors fail with EPERM, as on a read-only mount): destroy is refused with 503 naming
    the read-only database, the sandbox keeps running, and works again once writable."""
    need_root_tool("chattr")
    c = sdk(fsd)
    sb = c.create_sandbox(tier="process")
    sid = sb.id
    files = [os.path.join(small_fs.mnt, f) for f in ("isola.db", "isola.db-wal")]
    subprocess.run(["chattr", "+i"] + files, check=True)
    try:
        with pytest.raises(isola.errors.UnavailableError) as ei:
            c.delete_sandbox(sid)
        assert ei.value.status == 503 and "read-only" in str(ei.value), ei.value
        cp = cli(fsd, "rm", sid)
        assert cp.returncode != 0 and "read-only" in cp.stderr, cp
        assert state_of(c, sid) == "running"
        assert sb.exec("echo alive").stdout == "alive\n"
    finally:
        subprocess.run(["chattr", "-i"] + files, check=True)
    c.delete_sandbox(sid)
    fsd.stop()
    fsd.start()
    assert sid not in [s.id for s in sdk(fsd).list_sandboxes()]
    assert not leftovers(fsd, sid), leftovers(fsd, sid)

