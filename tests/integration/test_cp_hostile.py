# SPDX-License-Identifier: Apache-2.0
"""Downloads from a hostile or impersonated daemon: `isola cp ID:/out DST` and the Python
SDK's download_dir read crafted tars (hard links carrying data onto existing files,
symlink-then-file, `..`, absolute names, devices, fifos, setuid bits) and broken streams from
fake_isolad. Each case asserts the pre-existing victims are untouched, nothing was written
outside DST, and a refused or broken download leaves no partial tree behind."""
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fake_isolad import FakeIsolad, entry, tar_bytes

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("ISOLA_BUILD") or REPO / "build") / "src" / "cli" / "isola"
sys.path.insert(0, str(REPO / "sdk" / "python"))
import isola  # noqa: E402

PRECIOUS = b"precious, must not change\n"


@pytest.fixture
def world(tmp_path):
    """tmp/dst: an existing destination directory holding a victim file and a symlink to an
    outside victim; tmp/outside: a victim directory nothing may write into."""
    w = {"root": tmp_path, "dst": tmp_path / "dst", "outside": tmp_path / "outside"}
    w["dst"].mkdir()
    w["outside"].mkdir()
    (w["dst"] / "victim.txt").write_bytes(PRECIOUS)
    (w["outside"] / "victim.txt").write_bytes(PRECIOUS)
    (w["dst"] / "out").mkdir()
    (w["dst"] / "out" / "victim.txt").write_bytes(PRECIOUS)
    os.symlink(w["outside"] / "victim.txt", w["dst"] / "out" / "link-to-outside")
    return w


def snapshot(root):
    """Every path under root with its type, mode and content (symlinks by target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[str(p)] = ("file", st.st_mode, p.read_bytes())
            else:
                out[str(p)] = ("other", st.st_mode)
    return out


def victims_intact(w):
    assert (w["dst"] / "victim.txt").read_bytes() == PRECIOUS
    assert (w["dst"] / "out" / "victim.txt").read_bytes() == PRECIOUS
    assert (w["outside"] / "victim.txt").read_bytes() == PRECIOUS
    assert sorted(os.listdir(w["outside"])) == ["victim.txt"], "something written outside DST"
    assert not [n for n in os.listdir(w["dst"]) if n.startswith(".isola-cp-")], \
        "temporary directory left behind"


def run_cli(sock, *args):
    return subprocess.run([str(CLI), "--socket", str(sock)] + [str(a) for a in args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def fake(tmp_path):
    made = []

    def serve(body, cut_after=None):
        f = FakeIsolad(str(tmp_path / f"fake{len(made)}.sock"), body, cut_after)
        made.append(f)
        return f

    yield serve
    for f in made:
        f.close()


def d(name, mode=0o755):
    return entry(name, "dir", mode=mode)


def f(name, data, mode=0o644):
    return entry(name, "file", data=data, mode=mode)


# Archives the CLI must refuse: (id, members, words the error must contain)
REFUSED = [
    ("hardlink-with-data-onto-existing-file",
     [d("out/"), entry("out/x", "hardlink", data=b"PWNED", link="victim.txt")],
     "hard link"),
    ("hardlink-with-data-onto-existing-file-in-merged-dir",
     [d("out/"), entry("out/x", "hardlink", data=b"PWNED", link="out/victim.txt")],
     "hard link"),
    ("hardlink-to-an-existing-symlink",
     [d("out/"), entry("out/x", "hardlink", data=b"PWNED", link="out/link-to-outside")],
     "hard link"),
    ("hardlink-to-a-symlink-of-the-archive",
     [d("out/"), entry("out/s", "symlink", link=None),
      entry("out/x", "hardlink", data=b"PWNED", link="out/s")],
     "hard link"),
    ("hardlink-dotdot", [d("out/"), entry("out/x", "hardlink", link="../outside/victim.txt")],
     "hard link"),
    ("dotdot", [d("out/"), f("out/../../outside/victim.txt", b"PWNED")], "outside"),
    ("absolute", [d("out/"), f("/tmp/isola-hostile-absolute", b"PWNED")], "outside"),
    ("symlink-then-file-through-it",
     [d("out/"), entry("out/esc", "symlink", link="OUTSIDE"), f("out/esc/pwned", b"PWNED")],
     "out/esc/pwned"),
    ("second-top-entry", [d("out/"), f("other/pwned", b"PWNED")], "top entry"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_cli_refuses_hostile_archive(fake, world, case):
    _, members, words = case
    for ti, _data in members:  # symlinks aimed at the real outside victim directory
        if ti.issym():
            ti.linkname = str(world["outside"] / "victim.txt") if ti.linkname == "" \
                else ti.linkname.replace("OUTSIDE", str(world["outside"]))
    srv = fake(tar_bytes(members))
    before = snapshot(world["dst"])
    cp = run_cli(srv.sock_path, "cp", "sb1:/out", world["dst"])
    assert cp.returncode == 1, cp
    assert words.encode() in cp.stderr, cp.stderr
    victims_intact(world)
    assert snapshot(world["dst"]) == before, "a refused archive changed DST"
    assert not Path("/tmp/isola-hostile-absolute").exists()


def test_cli_hostile_but_harmless_entries(fake, world):
    """Devices and fifos are skipped, setuid bits dropped, a symlink entry then a file of the
    same name replaces the symlink (never written through), an existing symlink in DST is
    replaced, a hard link to a file of this archive works."""
    members = [
        d("out/"),
        entry("out/tty", "chr", devmajor=5, devminor=0, mode=0o666),
        entry("out/disk", "blk", devmajor=8, devminor=0, mode=0o666),
        entry("out/pipe", "fifo"),
        f("out/suid", b"#!/bin/sh\n", mode=0o4755),
        entry("out/swap", "symlink", link=str(world["outside"] / "victim.txt")),
        f("out/swap", b"new content"),
        f("out/link-to-outside", b"replaces the link"),
        f("out/a", b"AAA"),
        entry("out/b", "hardlink", link="out/a"),
    ]
    srv = fake(tar_bytes(members))
    cp = run_cli(srv.sock_path, "cp", "sb1:/out", world["dst"])
    assert cp.returncode == 0, cp
    out = world["dst"] / "out"
    victims_intact(world)
    for n in ("tty", "disk", "pipe"):
        assert not os.path.lexists(out / n), f"special file {n} was created"
    assert b"skipping" in cp.stderr
    assert stat.S_IMODE((out / "suid").stat().st_mode) == 0o755
    assert not (out / "swap").is_symlink() and (out / "swap").read_bytes() == b"new content"
    assert not (out / "link-to-outside").is_symlink()
    assert (out / "link-to-outside").read_bytes() == b"replaces the link"
    assert (out / "b").stat().st_ino == (out / "a").stat().st_ino
    assert (out / "victim.txt").read_bytes() == PRECIOUS  # merged, not replaced


def test_cli_broken_stream_leaves_nothing(fake, world):
    """The daemon cuts the chunked reply mid-archive: the CLI fails naming the cause and
    DST gets no partial tree (the tree goes into place only at the clean end)."""
    members = [d("tree/")] + [f(f"tree/f{i}", os.urandom(4096)) for i in range(200)]
    body = tar_bytes(members)
    for cut in (len(body) // 2, 512 * 9):  # inside a file; at an entry boundary
        srv = fake(body, cut_after=cut)
        new = world["root"] / f"new{cut}"
        cp = run_cli(srv.sock_path, "cp", "sb1:/tree", new)
        assert cp.returncode == 1, cp
        assert b"broke off" in cp.stderr, cp.stderr
        assert not new.exists(), "partial tree left at DST"
        cp = run_cli(srv.sock_path, "cp", "sb1:/tree", world["dst"])
        assert cp.returncode == 1, cp
        assert not (world["dst"] / "tree").exists(), "partial tree left in DST"
        victims_intact(world)
    srv = fake(body)
    cp = run_cli(srv.sock_path, "cp", "sb1:/tree", world["root"] / "whole")
    assert cp.returncode == 0, cp
    assert len(os.listdir(world["root"] / "whole")) == 200


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_sdk_download_dir_refuses_hostile_archive(fake, world, case):
    _, members, _words = case
    for ti, _data in members:
        if ti.issym():
            ti.linkname = str(world["outside"] / "victim.txt") if ti.linkname == "" \
                else ti.linkname.replace("OUTSIDE", str(world["outside"]))
    srv = fake(tar_bytes(members))
    before = snapshot(world["dst"])
    sb = isola.Client(socket_path=srv.sock_path).sandbox("sb1")
    with pytest.raises(isola.errors.IsolaError):
        sb.files.download_dir("/out", world["dst"] / "out")
    victims_intact(world)
    assert snapshot(world["dst"]) == before, "a refused archive changed local_dir"


def test_sdk_download_dir_symlink_then_tmp_name(fake, world):
    """A symlink planted under the name the old extractor used for its temporary file
    (`x.isola-tmp`) must not be written through when `x` follows."""
    members = [d("out/"),
               entry("out/x.isola-tmp", "symlink", link=str(world["outside"] / "victim.txt")),
               f("out/x", b"PWNED")]
    srv = fake(tar_bytes(members))
    sb = isola.Client(socket_path=srv.sock_path).sandbox("sb1")
    sb.files.download_dir("/out", world["dst"] / "out")
    victims_intact(world)
    assert (world["dst"] / "out" / "x").read_bytes() == b"PWNED"


def test_sdk_broken_stream_names_the_cause(fake, world):
    members = [d("tree/")] + [f(f"tree/f{i}", os.urandom(4096)) for i in range(200)]
    body = tar_bytes(members)
    srv = fake(body, cut_after=len(body) // 2)
    sb = isola.Client(socket_path=srv.sock_path).sandbox("sb1")
    with pytest.raises(isola.errors.IsolaError) as ei:
        sb.files.download_dir("/tree", world["root"] / "new")
    assert "broke off" in str(ei.value), ei.value
    assert not (world["root"] / "new").exists() or not os.listdir(world["root"] / "new")
