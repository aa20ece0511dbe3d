# SPDX-License-Identifier: Apache-2.0
"""The create fields `tmpfs`, `masked_paths` and `readonly_paths` (docs/oci.md, "tmpfs, masked
and read-only paths"; isola-runc maps a spec's tmpfs mounts and linux.maskedPaths/readonlyPaths
to them): any principal may set them (they only narrow what the sandbox sees), isolad checks
them naming the field, and an isolad restart, a hibernation (the process tier's setup runs
again at the wake) and a fork keep them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402  (the SDK users use)
from tenancy_util import Tenant  # noqa: E402

FIELDS = {
    "memory": "256M",
    "tmpfs": [{"destination": "/scratch", "size": "16M", "mode": 0o1777},
              {"destination": "/nx", "noexec": True, "mode": 0o700}],
    # /etc/hosts is the template's; /work and /secrets do not exist yet (skipped at create),
    # the sandbox makes them, and the next setup (a hibernation's wake) covers them.
    "masked_paths": ["/etc/hosts", "/secrets"],
    "readonly_paths": ["/work"],
}

CHECK = ("grep -E ' /(scratch|nx) ' /proc/self/mountinfo | cut -d' ' -f5,6,9-; "
         "echo w > /scratch/f && cat /scratch/f; cat /etc/hosts | wc -c")


def mounts_seen(c, sid):
    lines = c.sh(sid, CHECK).splitlines()
    scratch = next(line for line in lines if line.startswith("/scratch "))
    nx = next(line for line in lines if line.startswith("/nx "))
    assert "nosuid,nodev" in scratch and "noexec" not in scratch.split()[1], scratch
    assert "size=16384k" in scratch, scratch  # mode 1777 is tmpfs's default: not listed
    # No size: half the sandbox's memory (256M), as /dev/shm; noexec and the mode as asked.
    assert "noexec" in nx.split()[1] and "size=131072k" in nx and "mode=700" in nx, nx
    assert lines[-2:] == ["w", "0"], lines


def test_tmpfs_masked_readonly_survive_restart_and_hibernation(isolad):
    c = isolad.client(timeout=120)
    sb = c.create_sandbox(**FIELDS)
    sid = sb["id"]
    try:
        mounts_seen(c, sid)
        # Missing at create: skipped, so still writable now.
        c.sh(sid, "mkdir -p /work /secrets && printf '#!/bin/sh\\necho ran\\n' > /work/run.sh "
                  "&& chmod 755 /work/run.sh && echo s3cret > /secrets/key")
        isolad.restart()
        r = c.request("POST", f"/v1/sandboxes/{sid}/hibernate")
        assert r.status == 200, r
        r = c.request("POST", f"/v1/sandboxes/{sid}/resume")
        assert r.status == 200, r
        mounts_seen(c, sid)
        probe = ("/work/run.sh; (echo x > /work/new) 2>/dev/null || echo work-ro; "
                 "ls -A /secrets; (touch /secrets/y) 2>/dev/null || echo secrets-ro")
        out = c.sh(sid, probe)
        assert out == "ran\nwork-ro\nsecrets-ro\n", out
        # A fork's child is set up from the same stored spec: the same mounts.
        r = c.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 1}, timeout=120)
        assert r.status == 201, r
        kid = r.json()["children"][0]["id"]
        try:
            mounts_seen(c, kid)
            assert c.sh(kid, probe) == "ran\nwork-ro\nsecrets-ro\n"
        finally:
            c.delete_sandbox(kid)
    finally:
        c.delete_sandbox(sid)


def test_any_principal_may_narrow(isolad):
    """A tenant's user (not the operator) sets all three, through the Python SDK: they only
    narrow its own view."""
    t = Tenant(isolad)
    try:
        sdk = isola.Client(url=isolad.url, token=t.token, timeout=60)
        sb = sdk.create_sandbox(tmpfs=[{"destination": "/scratch", "size": "8M"}],
                                masked_paths=["/etc/hosts"], readonly_paths=["/etc"])
        res = sb.exec(["sh", "-c", "cat /etc/hosts | wc -c; (touch /etc/x) 2>/dev/null || "
                                   "echo ro; grep -c ' /scratch ' /proc/self/mountinfo"])
        assert res.stdout == "0\nro\n1\n", res
    finally:
        t.cleanup()


def test_bad_fields_are_refused_naming_them(isolad):
    c = isolad.client(timeout=60)
    for body, msg in (
            ({"tmpfs": [{"destination": "/proc/x"}]},
             "tmpfs: destination `/proc/x` is on isola's own /proc"),
            ({"tmpfs": [{"destination": "/dev/shm"}]}, "is on isola's own /dev"),
            ({"tmpfs": [{"destination": "/"}]}, "tmpfs: `/` must be an absolute path other"),
            ({"tmpfs": [{"destination": "/t", "uid": 0}]}, "unknown field `uid`"),
            ({"tmpfs": [{"size": "1M"}]}, "must be an object with a `destination`"),
            ({"tmpfs": [{"destination": "/t", "mode": 0o17777}]}, "field `tmpfs`: entry 0"),
            ({"tmpfs": [{"destination": "/t", "size": "1G"}], "memory": "64M"},
             "tmpfs `/t`: size 1073741824 exceeds the sandbox's memory limit"),
            ({"masked_paths": ["relative"]}, "masked_paths: `relative` must be an absolute"),
            ({"masked_paths": ["/a/../etc"]}, "without `.` or `..`"),
            ({"masked_paths": [7]}, "field `masked_paths`: entry 0 must be a path"),
            ({"readonly_paths": ["/"]}, "readonly_paths: `/` must be an absolute path other"),
            ({"readonly_paths": "/etc"}, "field `readonly_paths` must be an array"),
            ({"masked_paths": ["/x"] * 65}, "field `masked_paths` must be an array of at most"),
            ({"tmpfs": [{"destination": "/t"}], "snapshot": "s1"},
             "field `tmpfs/masked_paths/readonly_paths` cannot be combined with `snapshot`")):
        r = c.request("POST", "/v1/sandboxes", json=body)
        assert r.status == 400 and msg in r.json()["message"], (body, r.json())


def test_cli_flags_set_them(cli):
    """`isola run`/`create` take --tmpfs PATH[:OPTS] (Docker's form), --mask-path and
    --readonly-path; a bad option is refused by the CLI naming it, a bad path by isolad."""
    cp = cli("run", "--tmpfs", "/scratch:size=8M,noexec,mode=700", "--mask-path", "/etc/hosts",
             "--readonly-path", "/etc", "--", "sh", "-c",
             "grep ' /scratch ' /proc/self/mountinfo; "
             "cat /etc/hosts | wc -c; (touch /etc/x) 2>/dev/null || echo ro", timeout=120)
    assert cp.returncode == 0, cp.stderr
    mnt, size, ro = cp.stdout.decode().splitlines()
    assert "noexec" in mnt.split()[5] and "size=8192k" in mnt and "mode=700" in mnt, mnt
    assert (size, ro) == ("0", "ro"), cp.stdout
    cp = cli("create", "--tmpfs", "/x:size=lots")
    assert cp.returncode == 2 and b"--tmpfs `/x:size=lots`: `size=lots`" in cp.stderr, cp.stderr
    cp = cli("create", "--readonly-path", "relative")
    assert cp.returncode != 0 and b"readonly_paths: `relative` must be an absolute" in \
        cp.stderr, cp.stderr
