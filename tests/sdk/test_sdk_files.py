# SPDX-License-Identifier: Apache-2.0
"""Python SDK: files, directories, archives and templates."""

import io
import os
import tarfile

import pytest

import imagebuild
import isola


def test_write_read_stat(sb):
    e = sb.files.write("/tmp/a.txt", "hello world", mode=0o600)
    assert e.is_file and e.size == 11 and e.mode & 0o777 == 0o600 and e.path == "/tmp/a.txt"
    assert sb.files.read_text("/tmp/a.txt") == "hello world"
    st = sb.files.stat("/tmp/a.txt")
    assert st.type == "file" and st.size == 11
    assert sb.files.exists("/tmp/a.txt") and not sb.files.exists("/tmp/none")
    data = bytes(range(256)) * 1000
    sb.files.write("/tmp/big.bin", io.BytesIO(data))
    assert sb.files.read("/tmp/big.bin") == data
    sb.files.write("/tmp/gen.bin", (data[i:i + 7000] for i in range(0, len(data), 7000)))
    assert sb.files.read("/tmp/gen.bin") == data
    out = io.BytesIO()
    assert sb.files.read_to("/tmp/big.bin", out) == len(data) and out.getvalue() == data


def test_read_ranges(sb):
    sb.files.write("/tmp/r", b"0123456789")
    assert sb.files.read("/tmp/r", offset=2, length=3) == b"234"
    assert sb.files.read("/tmp/r", offset=7) == b"789"
    assert sb.files.read("/tmp/r", length=4) == b"6789"
    with pytest.raises(isola.RangeNotSatisfiableError) as ei:
        sb.files.read("/tmp/r", offset=50, length=2)
    assert ei.value.status == 416


def test_file_errors(sb):
    with pytest.raises(isola.NotFoundError):
        sb.files.read("/tmp/missing")
    with pytest.raises(isola.NotFoundError):
        sb.files.write("/tmp/no/parent/f", b"x")
    with pytest.raises(isola.InvalidError):
        sb.files.list("/etc/hostname")
    with pytest.raises(isola.InvalidError):
        sb.files.read("")


def test_mkdir_list_rename_remove(sb):
    with pytest.raises(isola.NotFoundError):
        sb.files.mkdir("/tmp/p/q/r")
    d = sb.files.mkdir("/tmp/p/q/r", parents=True)
    assert d.is_dir and d.path == "/tmp/p/q/r"
    with pytest.raises(isola.ConflictError):
        sb.files.mkdir("/tmp/p/q/r")
    sb.files.write("/tmp/p/f1", b"1")
    sb.files.write("/tmp/p/q/f2", b"22")
    top = sb.files.list("/tmp/p")
    assert sorted(top.names()) == ["f1", "q"] and not top.truncated and len(top) == 2
    deep = {e.name: e for e in sb.files.list("/tmp/p", depth=3)}
    assert {"f1", "q", "q/f2", "q/r"} <= set(deep), deep.keys()
    assert deep["q/f2"].size == 2 and deep["q/r"].is_dir
    moved = sb.files.rename("/tmp/p/f1", "/tmp/p/q/f1")
    assert moved.path == "/tmp/p/q/f1" and not sb.files.exists("/tmp/p/f1")
    with pytest.raises(isola.ConflictError):
        sb.files.rename("/tmp/p/q/f1", "/tmp/p/q/f2")
    sb.files.rename("/tmp/p/q/f1", "/tmp/p/q/f2", overwrite=True)
    assert sb.files.read("/tmp/p/q/f2") == b"1"
    with pytest.raises(isola.IsolaError):
        sb.files.remove("/tmp/p")  # not empty, not recursive
    sb.files.remove("/tmp/p", recursive=True)
    assert not sb.files.exists("/tmp/p")
    with pytest.raises(isola.NotFoundError):
        sb.files.remove("/tmp/p")


def test_upload_download_dir(sb, tmp_path):
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(os.urandom(70000))
    (src / "sub" / "deeper" / "c").write_text("c")
    os.chmod(src / "a.txt", 0o755)
    os.symlink("a.txt", src / "link")
    sb.files.mkdir("/tmp/up")
    res = sb.files.upload_dir(src, "/tmp/up")
    assert res.entries >= 6 and res.bytes >= 70000
    assert sb.files.read("/tmp/up/sub/b.bin") == (src / "sub" / "b.bin").read_bytes()
    assert sb.files.stat("/tmp/up/link").type == "symlink"
    assert sb.files.stat("/tmp/up/a.txt").mode & 0o777 == 0o755
    dst = tmp_path / "dst"
    names = sb.files.download_dir("/tmp/up", dst)
    assert "sub/deeper/c" in names and "a.txt" in names
    assert (dst / "a.txt").read_text() == "alpha"
    assert (dst / "sub" / "b.bin").read_bytes() == (src / "sub" / "b.bin").read_bytes()
    assert os.readlink(dst / "link") == "a.txt"
    assert os.stat(dst / "a.txt").st_mode & 0o777 == 0o755
    raw = sb.files.download_archive("/tmp/up/sub")
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        assert "sub/deeper/c" in t.getnames()


def test_upload_archive_refuses_escape(sb):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo("../evil")
        ti.size = 1
        t.addfile(ti, io.BytesIO(b"x"))
    with pytest.raises(isola.InvalidError):
        sb.files.upload_archive("/tmp", buf.getvalue())
    with pytest.raises(isola.NotFoundError):
        sb.files.download_archive("/tmp/nothing-here")


@pytest.fixture(scope="module")
def hello(tmp_path_factory):
    return imagebuild.build_hello(tmp_path_factory.mktemp("hello"))


def test_templates(client, hello, tmp_path):
    assert "host" in [t.name for t in client.list_templates()]
    progress = []
    path = tmp_path / "img.tar"
    path.write_bytes(imagebuild.docker_archive(hello))
    t = client.import_template("sdk-hello", path, on_progress=progress.append)
    try:
        assert t.name == "sdk-hello"
        assert all(isinstance(p, isola.ImportProgress) for p in progress)
        assert "sdk-hello" in [x.name for x in client.list_templates()]
        with client.create_sandbox("sdk-hello") as sb:
            assert sb.exec(["/hello"], timeout=20).stdout == "hello from template\n"
            with pytest.raises(isola.ConflictError):
                client.delete_template("sdk-hello")
    finally:
        client.delete_template("sdk-hello")
    assert "sdk-hello" not in [x.name for x in client.list_templates()]
    with pytest.raises(isola.NotFoundError):
        client.delete_template("sdk-hello")
    with pytest.raises(isola.IsolaError) as ei:
        client.import_template("sdk-bad", b"this is not a tar archive" * 100)
    assert ei.value.code in ("invalid", "not_supported"), ei.value
    with pytest.raises(isola.InvalidError):
        client.import_template(".bad name", b"x")
