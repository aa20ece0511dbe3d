# SPDX-License-Identifier: Apache-2.0
"""Named snapshots (docs/persistence.md): they outlive their source and seed any number of
sandboxes; a damaged snapshot fails clearly and builds nothing; ENOSPC leaves the source
running and a retry succeeds; another tenant's snapshot does not exist for you; restarts
(SIGTERM and kill -9 mid-snapshot) keep everything loadable. Judged inside the sandboxes and
on disk."""

import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from persist_util import require_op
from tenancy_util import ROOT_CONFTEST, Tenant

Isolad = ROOT_CONFTEST.Isolad
CLI = ROOT_CONFTEST.CLI
OP_TIMEOUT = 300

pytestmark = pytest.mark.tiers("process", "microvm")


def uname():
    return "s-" + uuid.uuid4().hex[:10]


def snapshot(c, sid, name, status=201):
    r = c.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": name},
                  timeout=OP_TIMEOUT)
    assert r.status == status, f"snapshot {sid} as {name}: {r}"
    return r.json()


def from_snapshot(c, name, status=201, **fields):
    r = c.request("POST", "/v1/sandboxes", json=dict(fields, snapshot=name), timeout=OP_TIMEOUT)
    assert r.status == status, f"create from {name}: {r}"
    return r.json()


def snap_dir(d, snap):
    return os.path.join(d.state_dir, "snapshots", snap["id"])


def payload_file(d, snap):
    """The largest file the tier wrote into the snapshot (not the manifest)."""
    root = snap_dir(d, snap)
    files = []
    for dp, _, fs in os.walk(root):
        files += [os.path.join(dp, f) for f in fs if f != "manifest.json"]
    assert files, f"no files in {root}"
    return max(files, key=os.path.getsize)


def sandbox_ids(c):
    return {sb["id"] for sb in c.list_sandboxes()}


@pytest.fixture
def cleanup_snapshots(api):
    names = []
    yield names
    for n in names:
        api.request("DELETE", f"/v1/snapshots/{n}")


def test_snapshot_outlives_source_and_seeds_three(isolad, api, make_sandbox, tier,
                                                  cleanup_snapshots):
    src = make_sandbox(labels={"team": "a"})["id"]
    require_op(api, src, "snapshot")
    api.sh(src, "mkdir -p /root/proj && echo v1 > /root/proj/a.txt && "
                "head -c 65536 /dev/urandom > /root/proj/blob")
    want_blob = api.read_file(src, "/root/proj/blob")
    name = uname()
    cleanup_snapshots.append(name)
    snap = snapshot(api, src, name)
    assert snap["name"] == name and snap["state"] == "ready" and snap["source"] == src
    assert snap["size"] > 0 and snap["tier"] == tier and snap["parent"] is None
    assert snap["level"] == ("files" if tier == "process" else snap["level"])
    assert os.path.exists(os.path.join(snap_dir(isolad, snap), "manifest.json"))
    # Immutable and independent: the source changes, then goes away.
    api.sh(src, "echo v2 > /root/proj/a.txt")
    assert api.request("DELETE", f"/v1/sandboxes/{src}").status == 204
    listed = {s["name"]: s for s in api.get_json("/v1/snapshots")["snapshots"]}
    assert name in listed and listed[name]["size"] == snap["size"]
    kids = [from_snapshot(api, name) for _ in range(3)]
    try:
        hosts = set()
        for k in kids:
            assert k["state"] == "running" and k["snapshot"] == name, k
            assert k["labels"] == {"team": "a"}, k
            assert api.sh(k["id"], "cat /root/proj/a.txt") == "v1\n"
            assert api.read_file(k["id"], "/root/proj/blob") == want_blob
            hosts.add(api.sh(k["id"], "hostname").strip())
        assert hosts == {k["id"] for k in kids}
        # Their writes stay their own.
        api.sh(kids[0]["id"], "echo mine > /root/proj/a.txt")
        assert api.sh(kids[1]["id"], "cat /root/proj/a.txt") == "v1\n"
        # A snapshot of a restored sandbox names its parent.
        child_name = uname()
        cleanup_snapshots.insert(0, child_name)
        child = snapshot(api, kids[0]["id"], child_name)
        assert child["parent"] == name, child
    finally:
        for k in kids:
            api.delete_sandbox(k["id"])
    # Deleted: gone from the list and the disk; creating from it is not_found.
    assert api.request("DELETE", f"/v1/snapshots/{child_name}").status == 204
    assert api.request("DELETE", f"/v1/snapshots/{name}").status == 204
    assert not os.path.exists(snap_dir(isolad, snap))
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": name})
    assert r.status == 404 and r.error_code == "not_found", r


def test_name_rules(api, make_sandbox, cleanup_snapshots):
    sid = make_sandbox()["id"]
    require_op(api, sid, "snapshot")
    name = uname()
    cleanup_snapshots.append(name)
    snapshot(api, sid, name)
    r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": name})
    assert r.status == 409 and r.error_code == "exists", r
    for bad in ("../x", ".hidden", "a/b", "x" * 64, ""):
        r = api.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": bad})
        assert r.status == 400, (bad, r)
    r = api.request("POST", "/v1/snapshots", json={"sandbox": "nosuchsandbox", "name": uname()})
    assert r.status == 404, r
    assert api.request("GET", "/v1/snapshots/nosuchsnapshot").status == 404
    assert api.request("DELETE", "/v1/snapshots/nosuchsnapshot").status == 404


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest", "missing"])
def test_damaged_snapshot_fails_clearly_and_builds_nothing(isolad, api, make_sandbox, damage,
                                                           cleanup_snapshots):
    sid = make_sandbox()["id"]
    require_op(api, sid, "snapshot")
    api.sh(sid, "head -c 200000 /dev/urandom > /root/data")
    name = uname()
    cleanup_snapshots.append(name)
    snap = snapshot(api, sid, name)
    target = payload_file(isolad, snap)
    rel = os.path.relpath(target, snap_dir(isolad, snap))
    size = os.path.getsize(target)
    if damage == "flip":
        with open(target, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        expect = [rel, "SHA-256"]
    elif damage == "truncate":
        os.truncate(target, size // 3)
        expect = [rel, "truncated"]
    elif damage == "manifest":
        m = os.path.join(snap_dir(isolad, snap), "manifest.json")
        os.truncate(m, os.path.getsize(m) // 2)
        expect = ["manifest.json", "corrupt"]
    else:
        os.unlink(target)
        expect = [rel, "missing"]
    before = sandbox_ids(api)
    dirs_before = set(os.listdir(os.path.join(isolad.state_dir, "sandboxes")))
    r = api.request("POST", "/v1/sandboxes", json={"snapshot": name}, timeout=OP_TIMEOUT)
    assert r.status == 400 and r.error_code == "invalid", r
    for word in expect:
        assert word in r.error_message, (word, r.error_message)
    assert name in r.error_message
    assert sandbox_ids(api) == before
    assert set(os.listdir(os.path.join(isolad.state_dir, "sandboxes"))) == dirs_before
    # The source is untouched and still works.
    assert api.sh(sid, "echo ok") == "ok\n"


@pytest.mark.process_only("tenant scoping is tier-independent")
def test_tenant_isolation(isolad, api, make_sandbox, cleanup_snapshots):
    a, b = Tenant(isolad), Tenant(isolad)
    try:
        sa = a.client.create_sandbox()
        name = uname()
        snapshot(a.client, sa["id"], name)
        # B: A's snapshot answers exactly like a missing one, everywhere.
        missing = uname()
        for method, path, body in (("GET", f"/v1/snapshots/{{}}", None),
                                   ("DELETE", f"/v1/snapshots/{{}}", None),
                                   ("POST", "/v1/sandboxes", "create")):
            rs = []
            for n in (name, missing):
                if body == "create":
                    rs.append(b.client.request("POST", "/v1/sandboxes", json={"snapshot": n}))
                else:
                    rs.append(b.client.request(method, path.format(n)))
            assert rs[0].status == rs[1].status == 404, rs
            assert rs[0].error_message.replace(name, "X") == \
                rs[1].error_message.replace(missing, "X"), rs
        assert b.client.get_json("/v1/snapshots")["snapshots"] == []
        # B cannot snapshot A's sandbox either; the same name is free for B.
        r = b.client.request("POST", "/v1/snapshots", json={"sandbox": sa["id"], "name": name})
        assert r.status == 404, r
        sb_ = b.client.create_sandbox()
        snapshot(b.client, sb_["id"], name)
        assert [s["name"] for s in a.client.get_json("/v1/snapshots")["snapshots"]] == [name]
        mine = a.client.get_json(f"/v1/snapshots/{name}")
        assert mine["source"] == sa["id"] and mine["tenant"] == a.name
        # The operator's socket acts for `default`, as for sandboxes: neither is its own.
        assert not [s for s in api.get_json("/v1/snapshots")["snapshots"]
                    if s["name"] == name]
        # A tenant that still owns a snapshot is not removable (its data is never orphaned).
        for x in a.client.list_sandboxes():
            a.client.delete_sandbox(x["id"])
        r = a.admin.request("DELETE", f"/v1/tenants/{a.name}")
        assert r.status == 409 and "snapshot" in r.error_message, r
        assert a.client.request("DELETE", f"/v1/snapshots/{name}").status == 204
        assert b.client.request("DELETE", f"/v1/snapshots/{name}").status == 204
    finally:
        a.cleanup()
        b.cleanup()


def test_audit_names_snapshot(isolad, api, make_sandbox, cleanup_snapshots):
    sid = make_sandbox()["id"]
    name = uname()
    cleanup_snapshots.append(name)
    snapshot(api, sid, name)
    cp = subprocess.run([str(CLI), "--socket", isolad.socket, "audit", "export"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert cp.returncode == 0, cp
    recs = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    hits = [r for r in recs if r.get("action") == "sandbox.snapshot" and r.get("target") == sid]
    assert hits and hits[-1]["detail"]["snapshot"] == name, hits[-3:]
    # hibernate names the image it wrote
    r = api.request("POST", f"/v1/sandboxes/{sid}/hibernate", timeout=OP_TIMEOUT)
    if r.status == 501:
        return
    assert r.status == 200, r
    cp = subprocess.run([str(CLI), "--socket", isolad.socket, "audit", "export"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    recs = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    hits = [r for r in recs if r.get("action") == "sandbox.hibernate" and r.get("target") == sid]
    assert hits and hits[-1]["detail"]["snapshot"] == f"hibernated/{sid}", hits[-3:]
    assert os.path.isfile(os.path.join(isolad.state_dir, "snapshots", "hibernated", sid,
                                       "manifest.json"))


# ---- an isolad of our own: snapshot dir on a tiny tmpfs, kill -9 ------------------------

@pytest.fixture(scope="module")
def tiny():
    """isolad with --snapshot-dir on an 8 MiB tmpfs."""
    mnt = f"/tmp/isola-snapfs-{uuid.uuid4().hex[:8]}"
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt], check=True)
    d = Isolad(extra_args=["--snapshot-dir", mnt])
    d.snapdir = mnt
    yield d
    try:
        d.discard()
    finally:
        subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)


@pytest.mark.process_only("a small tmpfs; the microvm variant needs a bigger one (CI)")
def test_enospc_keeps_sandbox_running_and_retry_succeeds(tiny, tier):
    c = tiny.client(timeout=OP_TIMEOUT)
    sid = c.create_sandbox()["id"]
    try:
        c.sh(sid, "head -c 3000000 /dev/urandom > /root/big")
        filler = os.path.join(tiny.snapdir, "filler")
        with open(filler, "wb") as f:  # leave ~1 MiB free
            f.write(os.urandom(7 * 1024 * 1024))
        r = c.request("POST", "/v1/snapshots", json={"sandbox": sid, "name": "full"})
        assert r.status == 507 and r.error_code == "no_space", r
        assert "No space" in r.error_message or "space" in r.error_message, r
        sb = c.get_json(f"/v1/sandboxes/{sid}")
        assert sb["state"] == "running", sb
        assert c.sh(sid, "echo alive && wc -c < /root/big") == "alive\n3000000\n"
        # Nothing half-written is left, and the name is free.
        assert sorted(n for n in os.listdir(tiny.snapdir) if n != "lost+found") in \
            (["filler"], ["filler", "hibernated"])
        assert c.get_json("/v1/snapshots")["snapshots"] == []
        os.unlink(filler)
        snap = snapshot(c, sid, "full")
        assert snap["size"] >= 1000000
        k = from_snapshot(c, "full")
        assert c.sh(k["id"], "wc -c < /root/big") == "3000000\n"
    finally:
        c.request("DELETE", "/v1/snapshots/full")


@pytest.mark.process_only("kill -9 timing tuned to the process tier")
def test_kill9_during_snapshot_then_consistent(isolad):
    c = isolad.client(timeout=OP_TIMEOUT)
    snapdir = os.path.join(isolad.state_dir, "snapshots")
    sid = c.create_sandbox()["id"]
    before, during = uname(), uname()
    c.sh(sid, "echo old > /root/f")
    snapshot(c, sid, before)
    c.sh(sid, "head -c 20000000 /dev/urandom > /root/big; echo new > /root/f")
    seen = {}

    def take():
        try:
            seen["r"] = isolad.client(timeout=60).request(
                "POST", "/v1/snapshots", json={"sandbox": sid, "name": during})
        except OSError as e:
            seen["r"] = e
    t = threading.Thread(target=take)
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(n.startswith(".tmp-") for n in os.listdir(snapdir)):
            break
        time.sleep(0.002)
    isolad.stop(kill9=True)
    t.join(60)
    assert not hasattr(seen.get("r"), "status") or seen["r"].status != 201, \
        "the snapshot finished before the kill: the test did not hit it mid-flight"
    # Startup cleaning removes only what isolad made: a stray snapshot-like directory goes,
    # an operator's lost+found stays.
    os.makedirs(os.path.join(snapdir, "lost+found"), exist_ok=True)
    os.makedirs(os.path.join(snapdir, "0123456789abcdef"))
    isolad.start()
    assert os.path.isdir(os.path.join(snapdir, "lost+found"))
    assert not os.path.exists(os.path.join(snapdir, "0123456789abcdef"))
    os.rmdir(os.path.join(snapdir, "lost+found"))
    c = isolad.client(timeout=OP_TIMEOUT)
    # The sandbox is live and running (the snapshot was cut short and rolled back).
    sb = c.get_json(f"/v1/sandboxes/{sid}")
    assert sb["state"] == "running", sb
    assert c.sh(sid, "cat /root/f") == "new\n"
    snaps = c.get_json("/v1/snapshots")["snapshots"]
    names = [s["name"] for s in snaps]
    assert before in names and during not in names, names
    assert all(s["state"] == "ready" for s in snaps), snaps
    assert not [n for n in os.listdir(snapdir) if n.startswith(".tmp-")]
    # The previous snapshot still loads.
    k = from_snapshot(c, before)
    assert c.sh(k["id"], "cat /root/f") == "old\n"
    for x in (k["id"], sid):
        c.delete_sandbox(x)
    c.request("DELETE", f"/v1/snapshots/{before}")


@pytest.mark.process_only("template removal rules are tier-independent")
def test_template_of_a_snapshot_is_kept(api, tmp_path, cleanup_snapshots):
    """A snapshot restores onto its template's image: the template cannot be removed while a
    snapshot needs it, and a sandbox made from the snapshot later still has it."""
    import imagebuild
    tname = f"it-snap-{uuid.uuid4().hex[:6]}"
    body = imagebuild.docker_archive(imagebuild.build_hello(tmp_path))
    with api.stream("POST", "/v1/templates", body=body, query={"name": tname},
                    headers={"Content-Type": "application/x-tar"}, kind="ndjson",
                    timeout=120) as s:
        assert s.status == 200, s.body_if_error()
        assert s.read_all(timeout=120)[-1].get("type") == "done"
    sid = api.create_sandbox(template=tname)["id"]
    api.write_file(sid, "/work/data.txt", b"on the image\n")
    name = uname()
    cleanup_snapshots.append(name)
    snapshot(api, sid, name)
    assert api.delete_sandbox(sid).status == 204
    r = api.request("DELETE", f"/v1/templates/{tname}")
    assert r.status == 409 and "snapshot" in r.error_message, r
    k = from_snapshot(api, name)
    try:
        assert api.read_file(k["id"], "/work/data.txt") == b"on the image\n"
        assert k["template"] == tname
        out = api.exec(k["id"], cmd=["/hello"])
        assert out["exit_code"] == 0, out
    finally:
        api.delete_sandbox(k["id"])
    assert api.request("DELETE", f"/v1/snapshots/{name}").status == 204
    assert api.request("DELETE", f"/v1/templates/{tname}").status == 204
