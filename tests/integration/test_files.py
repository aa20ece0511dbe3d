# SPDX-License-Identifier: Apache-2.0
"""Files API: raw files with ranges, fs operations, tar archives, path errors, hostile
archives (judged inside the sandbox and from the host), atomic writes."""

import io
import os
import tarfile
import threading
import uuid

import pytest

import isola_client as ic

pytestmark = pytest.mark.tiers("process", "microvm")


def files(sid):
    return f"/v1/sandboxes/{sid}/files"


def fs(sid, op):
    return f"/v1/sandboxes/{sid}/fs/{op}"


def mode_bits(v):
    """Permission bits of an entry's mode (an integer, or an octal string like "0755")."""
    if isinstance(v, str):
        v = int(v, 8)
    return v & 0o7777


def entries(obj):
    return ic.item_list(obj, "entries")


def test_write_read_round_trip_binary(api, sandbox):
    sid = sandbox["id"]
    data = bytes(range(256)) * 4096 + b"\0tail"  # 1 MiB + 5, every byte value
    api.write_file(sid, "/tmp/bin.dat", data)
    r = api.request("GET", files(sid), query={"path": "/tmp/bin.dat"})
    assert r.status == 200, r
    assert r.body == data
    assert int(r.headers["Content-Length"]) == len(data)
    # And the sandbox sees the same bytes.
    res = api.exec(sid, cmd=["sh", "-c", "wc -c < /tmp/bin.dat; sha256sum /tmp/bin.dat"])
    import hashlib
    assert res["stdout"].split()[0] == str(len(data))
    assert hashlib.sha256(data).hexdigest() in res["stdout"]


def test_write_empty_and_overwrite(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/e", b"something long")
    api.write_file(sid, "/tmp/e", b"")
    assert api.read_file(sid, "/tmp/e") == b""


def test_written_by_sandbox_read_by_api(api, sandbox):
    sid = sandbox["id"]
    api.sh(sid, "printf 'made inside' > /tmp/inside.txt")
    assert api.read_file(sid, "/tmp/inside.txt") == b"made inside"


def test_write_mode(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/run.sh", b"#!/bin/sh\necho ran\n", mode="0755")
    assert api.exec(sid, cmd=["/tmp/run.sh"])["stdout"] == "ran\n"
    st = api.get_json(fs(sid, "stat"), query={"path": "/tmp/run.sh"})
    assert mode_bits(st["mode"]) == 0o755, st
    r = api.request("PUT", files(sid), body=b"x", query={"path": "/tmp/m", "mode": "99x"})
    assert r.status == 400, r
    assert "mode" in r.error_message


def test_put_answers_the_entry(api, sandbox):
    """PUT answers with the written file's entry, the object fs/stat answers (the agent's
    write RESULT since issue 18: no second agent call for it)."""
    sid = sandbox["id"]
    r = api.write_file(sid, "/tmp/ent.txt", b"eleven byte", mode="0750")
    assert r.status == 200, r
    ent = r.json()
    assert ent["type"] == "file" and ent["name"] == "ent.txt", ent
    assert ent["path"] == "/tmp/ent.txt" and ent["size"] == 11, ent
    assert mode_bits(ent["mode"]) == 0o750, ent
    assert ent["uid"] == 0 and ent["owner"] == "root" and ent["group"] == "root", ent
    st = api.get_json(fs(sid, "stat"), query={"path": "/tmp/ent.txt"})
    assert ent == st, (ent, st)
    assert isinstance(ent["mtime"], int) and ent["mtime"] > 0, ent
    # A replace answers the new file's entry.
    ent2 = api.write_file(sid, "/tmp/ent.txt", b"x").json()
    assert ent2["size"] == 1 and mode_bits(ent2["mode"]) == 0o644, ent2


def test_default_modes(api, sandbox):
    """Without a mode, files and directories get the ordinary 0644/0755 (umask 022), so the
    sandbox's non-root user can read what the API wrote; a daemon's private umask must not
    leak into the sandbox."""
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/plain", b"p")
    assert mode_bits(api.get_json(fs(sid, "stat"), query={"path": "/tmp/plain"})["mode"]) \
        == 0o644
    r = api.request("POST", fs(sid, "mkdir"), json={"path": "/tmp/plaindir"})
    assert r.status in (200, 201), r
    assert mode_bits(r.json()["mode"]) == 0o755, r.json()
    root = api.get_json(fs(sid, "stat"), query={"path": "/"})
    assert mode_bits(root["mode"]) == 0o755, f"the sandbox's / is {oct(mode_bits(root['mode']))}"


def test_range_requests(api, sandbox):
    sid = sandbox["id"]
    data = bytes(range(100))
    api.write_file(sid, "/tmp/r", data)
    r = api.request("GET", files(sid), query={"path": "/tmp/r"}, headers={"Range": "bytes=10-19"})
    assert r.status == 206, r
    assert r.body == data[10:20]
    assert r.headers["Content-Range"] == "bytes 10-19/100"
    r = api.request("GET", files(sid), query={"path": "/tmp/r"}, headers={"Range": "bytes=90-"})
    assert r.status == 206 and r.body == data[90:], r
    r = api.request("GET", files(sid), query={"path": "/tmp/r"}, headers={"Range": "bytes=-5"})
    assert r.status == 206 and r.body == data[95:], r
    r = api.request("GET", files(sid), query={"path": "/tmp/r"},
                    headers={"Range": "bytes=100-200"})
    assert r.status == 416, r
    assert r.headers.get("Content-Range") == "bytes */100"


def test_fs_mkdir_list_stat(api, sandbox):
    sid = sandbox["id"]
    r = api.request("POST", fs(sid, "mkdir"), json={"path": "/tmp/t/a/b", "parents": True})
    assert r.status in (200, 201), r
    ent = r.json()
    assert ent["type"] == "dir"
    api.write_file(sid, "/tmp/t/f1", b"12345")
    api.write_file(sid, "/tmp/t/a/f2", b"x")
    api.write_file(sid, "/tmp/t/a/b/f3", b"deep")
    api.sh(sid, "ln -s f1 /tmp/t/link")
    one = entries(api.get_json(fs(sid, "list"), query={"path": "/tmp/t", "depth": 1}))
    names = sorted(e["name"] for e in one)
    assert names == ["a", "f1", "link"], one
    by = {e["name"]: e for e in one}
    assert by["f1"]["type"] == "file" and by["f1"]["size"] == 5
    assert by["a"]["type"] == "dir"
    assert by["link"]["type"] == "symlink" and by["link"]["target"] == "f1"
    two = entries(api.get_json(fs(sid, "list"), query={"path": "/tmp/t", "depth": 2}))
    paths = sorted(e["path"] for e in two)
    assert "/tmp/t/a/f2" in paths and "/tmp/t/a/b" in paths, paths
    assert "/tmp/t/a/b/f3" not in paths, "depth 2 must not descend further"
    st = api.get_json(fs(sid, "stat"), query={"path": "/tmp/t/a/b/f3"})
    assert st["type"] == "file" and st["size"] == 4 and st["path"] == "/tmp/t/a/b/f3"
    # mkdir without parents under a missing parent; mkdir of an existing path.
    r = api.request("POST", fs(sid, "mkdir"), json={"path": "/tmp/none/x"})
    assert r.status == 404, r
    r = api.request("POST", fs(sid, "mkdir"), json={"path": "/tmp/t"})
    assert r.status == 409, r
    r = api.request("GET", fs(sid, "list"), query={"path": "/tmp/t/f1"})
    assert r.status in (400, 409), r  # not a directory
    r = api.request("GET", fs(sid, "list"), query={"path": "/tmp/t", "depth": 0})
    assert r.status == 400, r


def test_fs_rename(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/a", b"A")
    api.write_file(sid, "/tmp/b", b"B")
    r = api.request("POST", fs(sid, "rename"), json={"from": "/tmp/a", "to": "/tmp/b"})
    assert r.status == 409, r
    assert api.read_file(sid, "/tmp/b") == b"B"
    r = api.request("POST", fs(sid, "rename"),
                    json={"from": "/tmp/a", "to": "/tmp/b", "overwrite": True})
    assert r.status == 200, r
    assert api.read_file(sid, "/tmp/b") == b"A"
    assert api.request("GET", files(sid), query={"path": "/tmp/a"}).status == 404
    r = api.request("POST", fs(sid, "rename"), json={"from": "/tmp/missing", "to": "/tmp/c"})
    assert r.status == 404, r


def test_fs_remove(api, sandbox):
    sid = sandbox["id"]
    api.sh(sid, "mkdir -p /tmp/rm/x/y && touch /tmp/rm/x/y/z /tmp/rm/f")
    r = api.request("POST", fs(sid, "remove"), json={"path": "/tmp/rm"})
    assert r.status in (400, 409), r
    assert api.sh(sid, "ls /tmp/rm | sort") == "f\nx\n"
    r = api.request("POST", fs(sid, "remove"), json={"path": "/tmp/rm/f"})
    assert r.status in (200, 204), r
    r = api.request("POST", fs(sid, "remove"), json={"path": "/tmp/rm", "recursive": True})
    assert r.status in (200, 204), r
    assert api.exec(sid, cmd=["test", "-e", "/tmp/rm"])["exit_code"] == 1
    r = api.request("POST", fs(sid, "remove"), json={"path": "/tmp/rm"})
    assert r.status == 404, r


def test_remove_does_not_follow_symlinks(api, sandbox):
    sid = sandbox["id"]
    api.sh(sid, "mkdir -p /tmp/keep /tmp/d && touch /tmp/keep/precious && "
                "ln -s /tmp/keep /tmp/d/link")
    r = api.request("POST", fs(sid, "remove"), json={"path": "/tmp/d", "recursive": True})
    assert r.status in (200, 204), r
    assert api.sh(sid, "ls /tmp/keep") == "precious\n"


def test_path_errors(api, sandbox):
    sid = sandbox["id"]
    r = api.request("GET", files(sid), query={"path": "/tmp/a\0b"})
    assert r.status == 400, r
    assert r.error_code == "invalid"
    r = api.request("PUT", files(sid), body=b"x", query={"path": "/tmp/nul\0x"})
    assert r.status == 400, r
    r = api.request("GET", files(sid))
    assert r.status == 400 and "path" in r.error_message, r
    r = api.request("GET", files(sid), query={"path": ""})
    assert r.status == 400, r
    r = api.request("GET", files(sid), query={"path": "/tmp/does-not-exist"})
    assert r.status == 404, r
    assert r.error_code == "not_found" and "/tmp/does-not-exist" in r.error_message
    r = api.request("GET", files(sid), query={"path": "/tmp"})
    assert r.status in (400, 409), r  # a directory is not a file
    r = api.request("GET", files(sid), query={"path": "/" + "a" * 5000})
    assert r.status in (400, 404, 414), r
    r = api.request("PUT", files(sid), body=b"x", query={"path": "/tmp/no/such/dir/f"})
    assert r.status == 404, r


def test_relative_paths_are_in_home(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "rel.txt", b"relative")
    home = api.sh(sid, 'printf %s "$HOME"') or "/root"
    assert api.read_file(sid, f"{home}/rel.txt") == b"relative"
    assert api.read_file(sid, "rel.txt") == b"relative"
    # ".." in a relative path stays inside the sandbox: /root/../../../etc/hostname is
    # /etc/hostname *of the sandbox*, which the API may serve or refuse, never a host file.
    r = api.request("GET", files(sid), query={"path": "../../../../../../etc/shadow"})
    assert r.status in (200, 400, 403, 404), r


def test_file_ops_run_as_the_sandbox_user(api, make_sandbox):
    """The agent does file operations as the sandbox's user: a root-only file is not
    readable through the API when the sandbox's default user is `user`."""
    sb = make_sandbox(user="user")
    sid = sb["id"]
    assert api.exec(sid, cmd=["id", "-u"])["stdout"] == "1000\n"
    res = api.exec(sid, cmd=["sh", "-c", "echo secret > /tmp/s && chmod 600 /tmp/s"],
                   user="root")
    assert res["exit_code"] == 0, res
    r = api.request("GET", files(sid), query={"path": "/tmp/s"})
    assert r.status == 403, r
    assert r.error_code == "forbidden"
    ent = api.write_file(sid, "/tmp/mine", b"m").json()
    assert api.sh(sid, "stat -c %u /tmp/mine") == "1000\n"
    assert ent["uid"] == 1000 and ent["owner"] == "user" and ent["type"] == "file", ent


def make_tar(entries_):
    """entries_: list of (TarInfo, data|None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in entries_:
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def tfile(name, mode=0o644):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.REGTYPE
    ti.mode = mode
    return ti


def tdir(name, mode=0o755):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    ti.mode = mode
    return ti


def tlink(name, target, hard=False):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    ti.linkname = target
    return ti


def test_archive_upload_and_download(api, sandbox):
    sid = sandbox["id"]
    tree = [(tdir("proj"), None), (tfile("proj/README", 0o644), b"readme\n"),
            (tdir("proj/src"), None), (tfile("proj/src/main.py", 0o755), b"print(1)\n"),
            (tfile("proj/src/blob.bin"), os.urandom(300000)),
            (tlink("proj/latest", "src/main.py"), None), (tdir("proj/empty"), None)]
    body = make_tar(tree)
    api.sh(sid, "mkdir -p /tmp/up")
    r = api.request("PUT", f"/v1/sandboxes/{sid}/archive", body=body, query={"path": "/tmp/up"},
                    headers={"Content-Type": "application/x-tar"})
    assert r.status in (200, 201, 204), r
    listing = api.sh(sid, "cd /tmp/up && find . | sort")
    assert listing.split() == [".", "./proj", "./proj/README", "./proj/empty", "./proj/latest",
                               "./proj/src", "./proj/src/blob.bin", "./proj/src/main.py"]
    assert api.sh(sid, "readlink /tmp/up/proj/latest") == "src/main.py\n"
    assert api.sh(sid, "stat -c %a /tmp/up/proj/src/main.py") == "755\n"
    assert api.read_file(sid, "/tmp/up/proj/src/blob.bin") == tree[4][1]
    # Download the tree again and compare.
    r = api.request("GET", f"/v1/sandboxes/{sid}/archive", query={"path": "/tmp/up/proj"})
    assert r.status == 200, r
    assert "application/x-tar" in r.headers.get("Content-Type", "")
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        members = {m.name.rstrip("/"): m for m in t.getmembers()}
        assert set(members) >= {"proj", "proj/README", "proj/src", "proj/src/main.py",
                                "proj/src/blob.bin", "proj/latest", "proj/empty"}, set(members)
        assert all(not m.name.startswith("/") and ".." not in m.name.split("/")
                   for m in members.values())
        assert t.extractfile(members["proj/README"]).read() == b"readme\n"
        assert t.extractfile(members["proj/src/blob.bin"]).read() == tree[4][1]
        assert members["proj/latest"].issym() and members["proj/latest"].linkname == "src/main.py"
        assert (members["proj/src/main.py"].mode & 0o777) == 0o755
        assert members["proj/empty"].isdir()


def test_archive_of_a_single_file(api, sandbox):
    sid = sandbox["id"]
    api.write_file(sid, "/tmp/one.txt", b"single")
    r = api.request("GET", f"/v1/sandboxes/{sid}/archive", query={"path": "/tmp/one.txt"})
    assert r.status == 200, r
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        names = t.getnames()
        assert names == ["one.txt"], names
        assert t.extractfile("one.txt").read() == b"single"


def test_archive_errors(api, sandbox):
    sid = sandbox["id"]
    r = api.request("GET", f"/v1/sandboxes/{sid}/archive", query={"path": "/tmp/missing"})
    assert r.status == 404, r
    r = api.request("PUT", f"/v1/sandboxes/{sid}/archive", body=b"this is not a tar" * 100,
                    query={"path": "/tmp"})
    assert r.status == 400, r


HOSTILE = {
    "dotdot": lambda tag: [(tfile(f"../../../../../../tmp/{tag}"), b"escaped")],
    "dotdot-inner": lambda tag: [(tdir("ok"), None), (tfile(f"ok/../../{tag}"), b"escaped")],
    "absolute": lambda tag: [(tfile(f"/tmp/{tag}"), b"escaped")],
    "symlink-then-file": lambda tag: [(tlink("link", f"/tmp/{tag}-dir"), None),
                                      (tfile("link/evil"), b"escaped")],
    "symlink-dotdot-then-file": lambda tag: [(tlink("l2", "../../.."), None),
                                             (tfile(f"l2/tmp/{tag}"), b"escaped")],
    "hardlink-outside": lambda tag: [(tlink("h", "/etc/passwd", hard=True), None)],
    "hardlink-dotdot": lambda tag: [(tlink("h", f"../{tag}-victim", hard=True), None)],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_archive_is_refused(api, sandbox, kind):
    sid = sandbox["id"]
    tag = "esc-" + uuid.uuid4().hex[:8]
    # A target dir inside the sandbox, and the places an escape would land.
    api.sh(sid, f"mkdir -p /tmp/target/deep /tmp/{tag}-dir && echo victim > /tmp/target/"
                f"{tag}-victim")
    body = make_tar(HOSTILE[kind](tag))
    r = api.request("PUT", f"/v1/sandboxes/{sid}/archive", body=body,
                    query={"path": "/tmp/target/deep"},
                    headers={"Content-Type": "application/x-tar"})
    assert r.status == 400, f"{kind}: {r}"
    assert r.error_code == "invalid"
    # Inside the sandbox: nothing escaped the target, the victim is intact.
    res = api.exec(sid, cmd=["sh", "-c",
                             f"ls /tmp/{tag} /tmp/{tag}-dir/evil /tmp/target/{tag} 2>&1; "
                             f"cat /tmp/target/{tag}-victim; ls -A /tmp/{tag}-dir"])
    assert "escaped" not in res["stdout"]
    assert res["stdout"].count("No such file") == 3, res["stdout"]
    assert "victim\n" in res["stdout"]
    # From the host: nothing appeared in the host's /tmp or / either.
    for p in (f"/tmp/{tag}", f"/{tag}", f"/tmp/{tag}-dir"):
        assert not os.path.exists(p), f"{kind}: host path {p} was created"


def test_hostile_archive_device_node(api, sandbox):
    sid = sandbox["id"]
    ti = tarfile.TarInfo("dev-null")
    ti.type = tarfile.CHRTYPE
    ti.devmajor, ti.devminor = 1, 3
    api.sh(sid, "mkdir -p /tmp/devt")
    r = api.request("PUT", f"/v1/sandboxes/{sid}/archive", body=make_tar([(ti, None)]),
                    query={"path": "/tmp/devt"})
    assert r.status in (200, 204, 400), r
    res = api.exec(sid, cmd=["sh", "-c", "[ -c /tmp/devt/dev-null ] && echo DEVICE || echo none"])
    assert res["stdout"] == "none\n", "a device node from an archive must never be created"


def test_write_is_atomic(api, sandbox):
    """A reader never sees a partial file while writers replace it, and no temp files remain."""
    sid = sandbox["id"]
    size = 4 << 20
    a, b = b"a" * size, b"b" * size
    api.sh(sid, "mkdir -p /tmp/atomic")
    api.write_file(sid, "/tmp/atomic/f", a)
    stop = threading.Event()
    bad, reads, errors = [], [0], []

    def reader():
        try:
            while not stop.is_set():
                data = api.read_file(sid, "/tmp/atomic/f")
                reads[0] += 1
                if data not in (a, b):
                    bad.append((len(data), data[:1], data[-1:]))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(12):
            api.write_file(sid, "/tmp/atomic/f", b if i % 2 == 0 else a)
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    assert reads[0] > 0
    assert not bad, f"partial reads: {bad[:5]}"
    assert api.sh(sid, "ls -A /tmp/atomic") == "f\n", "temp files left behind"


def test_upload_larger_than_window(api, sandbox):
    """16 MiB through the credit window both ways."""
    sid = sandbox["id"]
    data = os.urandom(1 << 20) * 16
    api.write_file(sid, "/tmp/big", data)
    assert api.read_file(sid, "/tmp/big") == data
