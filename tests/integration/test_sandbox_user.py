# SPDX-License-Identifier: Apache-2.0
"""The agent's side of E2B parity (docs/e2b.md): the default user `user` created in a sandbox
whose template lacks it, owner names from the sandbox's own /etc, and a boot_id of its own."""

import io
import tarfile
import uuid

import pytest

import imagebuild
from persist_util import require_op
from test_persistence import post
from test_templates import import_template

BOOT_ID = "/proc/sys/kernel/random/boot_id"


@pytest.fixture(scope="module")
def no_user_template(isolad, tmp_path_factory):
    """An image whose uid 1000 is `ubuntu` and that has no `user`, with shadow and sudo's
    drop-in directory."""
    api = isolad.client()
    hello = imagebuild.build_hello(tmp_path_factory.mktemp("hello"))
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    layer = imagebuild.tar_bytes([
        ("etc", None, 0o755, D),
        ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nubuntu:x:1000:1000::/home/ubuntu:/bin/sh",
         0o644, F),
        ("etc/group", b"root:x:0:\nubuntu:x:1000:\n", 0o644, F),
        ("etc/shadow", b"root:*:19000:0:99999:7:::\nubuntu:!:19000:0:99999:7:::\n", 0o640, F),
        ("etc/sudoers.d", None, 0o750, D),
    ])
    name = f"it-nouser-{uuid.uuid4().hex[:6]}"
    status, events = import_template(api, name, imagebuild.docker_archive(hello, [layer]))
    assert status == 200 and events[-1].get("type") == "done", events
    yield name
    api.request("DELETE", f"/v1/templates/{name}")


def test_user_created_when_template_lacks_it(api, make_sandbox, no_user_template):
    sid = make_sandbox(template=no_user_template)["id"]
    passwd = api.read_file(sid, "/etc/passwd").decode()
    # uid 1000 is taken by ubuntu: `user` gets the next free id, its own group, a home.
    # The template's last line had no newline: the new entry still starts on its own.
    assert passwd.endswith("\nuser:x:1001:1001::/home/user:/bin/bash\n"), passwd
    assert "ubuntu:x:1000:1000::/home/ubuntu:/bin/sh\n" in passwd, passwd
    assert api.read_file(sid, "/etc/group").decode().endswith("\nuser:x:1001:\n")
    assert api.read_file(sid, "/etc/shadow").decode().endswith("\nuser:!::0:99999:7:::\n")
    assert api.read_file(sid, "/etc/sudoers.d/isola-user") == \
        b"user ALL=(ALL:ALL) NOPASSWD: ALL\n"
    res = api.exec(sid, cmd=["/hello", "id"], user="user")
    assert res["exit_code"] == 0 and res["stdout"] == "1001\n", res
    # Its home (the image's WorkingDir stays the working directory), owned by it.
    assert api.exec(sid, cmd=["/hello", "env", "HOME"], user="user")["stdout"] == "/home/user\n"
    api.write_file(sid, "/home/user/probe", b"x")
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/home/user"})
    assert (st["uid"], st["gid"], st.get("owner"), st.get("group")) == \
        (1001, 1001, "user", "user"), st
    # The native API's default stays root.
    assert api.exec(sid, cmd=["/hello", "id"])["stdout"] == "0\n"


def test_user_added_once(api, make_sandbox, no_user_template):
    """A hibernate/resume runs setup again: the entry, already in the layer, is not doubled."""
    sid = make_sandbox(template=no_user_template)["id"]
    require_op(api, sid, "hibernate")
    post(api, sid, "hibernate")
    post(api, sid, "resume")
    passwd = api.read_file(sid, "/etc/passwd").decode()
    assert passwd.count("\nuser:") == 1, passwd


def test_owner_names_from_the_sandbox(api, sandbox):
    """Names come from the sandbox's /etc/passwd, not the host's: renaming uid 1000 there
    renames the owner; an id without an entry stays a number."""
    sid = sandbox["id"]
    api.sh(sid, "touch /tmp/o", user="user")
    api.sh(sid, "touch /tmp/n", user="4242")
    api.sh(sid, "sed -i 's/^user:/renamed:/' /etc/passwd", user="root")
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/tmp/o"})
    assert (st["uid"], st.get("owner"), st.get("group")) == (1000, "renamed", "user"), st
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/tmp/n"})
    assert st["uid"] == 4242 and "owner" not in st and st.get("group") == "root", st


def test_boot_id_own_kept_across_pause_new_after_hibernate(api, make_sandbox):
    with open(BOOT_ID) as f:
        host = f.read()
    a = make_sandbox()["id"]
    b = make_sandbox()["id"]
    first = api.sh(a, f"cat {BOOT_ID}")
    assert len(first.strip()) == 36 and first != host, (first, host)
    assert api.sh(b, f"cat {BOOT_ID}") != first, "two sandboxes share a boot_id"
    # Read-only even for root inside.
    assert api.exec(a, cmd=["sh", "-c", f"echo x > {BOOT_ID}"])["exit_code"] != 0
    require_op(api, a, "pause")
    post(api, a, "pause")
    post(api, a, "resume")
    assert api.sh(a, f"cat {BOOT_ID}") == first, "a pause changed boot_id"
    require_op(api, a, "hibernate")
    post(api, a, "hibernate")
    post(api, a, "resume")
    after = api.sh(a, f"cat {BOOT_ID}")
    assert len(after.strip()) == 36 and after not in (first, host), (first, after)


def _layer(entries):
    """A tar layer from (name, data|None, mode, type, linkname) entries."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode, kind, link in entries:
            ti = tarfile.TarInfo(name)
            ti.mode, ti.type, ti.linkname, ti.mtime = mode, kind, link, 1700000000
            if kind == tarfile.REGTYPE:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def test_user_seed_follows_no_symlink(api, make_sandbox, tmp_path):
    """A template whose home/user, shadow and sudoers.d are symlinks: the user is still added
    to passwd and group, but nothing is written or chowned through a link."""
    hello = imagebuild.build_hello(tmp_path)
    D, F, L = tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.SYMTYPE
    layer = _layer([
        ("etc", None, 0o755, D, ""),
        ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644, F, ""),
        ("etc/group", b"root:x:0:\n", 0o644, F, ""),
        ("etc/shadow", None, 0o777, L, "/tmp/shadow-target"),
        ("etc/sudoers.d", None, 0o777, L, "/tmp"),
        ("home", None, 0o755, D, ""),
        ("home/user", None, 0o777, L, "/etc"),
    ])
    name = f"it-nouser-links-{uuid.uuid4().hex[:6]}"
    status, events = import_template(api, name, imagebuild.docker_archive(hello, [layer]))
    assert status == 200 and events[-1].get("type") == "done", events
    try:
        sid = make_sandbox(template=name)["id"]
        assert api.read_file(sid, "/etc/passwd").decode().endswith(
            "\nuser:x:1000:1000::/home/user:/bin/bash\n")
        for p in ("/home/user", "/etc/shadow", "/etc/sudoers.d"):
            st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": p})
            assert st["type"] == "symlink", st  # the template's links reached the sandbox
        st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/etc"})
        assert st["uid"] == 0, f"/etc was chowned through the home/user symlink: {st}"
        for p in ("/tmp/shadow-target", "/tmp/isola-user"):
            r = api.request("GET", f"/v1/sandboxes/{sid}/fs/stat", query={"path": p})
            assert r.status == 404, f"{p} was written through a symlink: {r}"
    finally:
        api.request("DELETE", f"/v1/templates/{name}")
