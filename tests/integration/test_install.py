# SPDX-License-Identifier: Apache-2.0
"""scripts/install.sh (issue 15, README command 1): a staged install (DESTDIR + --prefix under a
temp dir) puts isola, isolad, isola-agent, the man pages and completions the build made and
isolad.service where they belong; the installed isolad finds the installed agent and runs a
sandbox for the installed CLI; --uninstall removes every file and directory it made. The
socket group: a non-root member of the group drives isolad through its 0660 socket, a
non-member is refused with a hint naming the group."""

import os
import shutil
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install.sh"
BUILD = ROOT_CONFTEST.BUILD
AGENT = ROOT_CONFTEST.AGENT  # a sanitizer build has no agent: the normal build's
PREFIX = "/opt/isola-it"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="install and useradd need root")


def install(*args, destdir=None, check=True):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = str(destdir)
    cp = subprocess.run(["bash", str(INSTALL), "--build", str(BUILD), "--agent", str(AGENT), *args],
                        capture_output=True, text=True, env=env, timeout=120)
    if check:
        assert cp.returncode == 0, f"install.sh {args}: {cp.returncode}\n{cp.stdout}\n{cp.stderr}"
    return cp


@pytest.fixture
def staged():
    d = Path(tempfile.mkdtemp(prefix="isola-inst-"))
    os.chmod(d, 0o755)  # the test users below run the installed CLI
    yield d
    shutil.rmtree(d, ignore_errors=True)


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_staged_install_and_uninstall(staged):
    out = install("--prefix", PREFIX, destdir=staged).stdout
    p = staged / PREFIX.lstrip("/")
    for f in ("bin/isola", "bin/isolad", "libexec/isola/isola-agent"):
        st = (p / f).stat()
        assert stat.S_IMODE(st.st_mode) == 0o755, f
    assert (p / "bin/isolad").read_bytes() == (BUILD / "src/isolad/isolad").read_bytes()
    # Man pages and completions: every one the build made (branch cli generates them).
    mans = sorted(x.name for x in (BUILD / "src/cli").glob("*.1"))
    assert "isola.1" in mans and "isola-exec.1" in mans, mans
    assert sorted(x.name for x in (p / "share/man/man1").glob("*.1")) == mans
    comp = {"bash": "share/bash-completion/completions/isola", "zsh": "share/zsh/site-functions/_isola",
            "fish": "share/fish/vendor_completions.d/isola.fish"}
    for sh, dest in comp.items():
        assert (p / dest).exists() == (BUILD / "src/cli" / f"isola.{sh}").exists(), sh
    assert f"{len(mans)} man pages" in out, out
    unit = (staged / "etc/systemd/system/isolad.service").read_text()
    exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_start == [f"ExecStart={PREFIX}/bin/isolad --state-dir /var/lib/isola "
                          f"--socket /run/isola/isolad.sock --socket-group isola "
                          f"--expose-listen 127.0.0.1:8089"], unit
    assert "WantedBy=multi-user.target" in unit
    manifest = (p / "share/isola/install-manifest").read_text().splitlines()
    assert f"{PREFIX}/bin/isola" in manifest and "/etc/systemd/system/isolad.service" in manifest
    assert not any(m.startswith("group:") for m in manifest), "DESTDIR: no group is created"
    # A second install over the first is fine and uninstall still removes everything.
    install("--prefix", PREFIX, destdir=staged)
    install("--prefix", PREFIX, "--uninstall", destdir=staged)
    assert tree(staged) == [], f"left after --uninstall: {tree(staged)}"


def test_install_refuses_bad_arguments(staged):
    cp = install("--prefix", "relative/dir", destdir=staged, check=False)
    assert cp.returncode != 0 and "must be an absolute path" in cp.stderr, cp
    cp = install("--prefix", PREFIX, "--uninstall", destdir=staged, check=False)
    assert cp.returncode != 0 and "no install manifest" in cp.stderr, cp
    cp = install("--frobnicate", destdir=staged, check=False)
    assert cp.returncode != 0 and "unknown option `--frobnicate`" in cp.stderr, cp
    cp = install("--group", "Bad Group", destdir=staged, check=False)
    assert cp.returncode != 0 and "not a valid group name" in cp.stderr, cp
    assert tree(staged) == [], "a refused install writes nothing"


def run_as(user, *argv, timeout=120):
    return subprocess.run(["runuser", "-u", user, "--", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, cwd="/")


@pytest.fixture
def group_users():
    """A fresh group and two system users, one in it, one not; removed afterwards."""
    tag = uuid.uuid4().hex[:8]
    group, member, other = f"isola-t{tag}", f"isola-m{tag}", f"isola-o{tag}"
    made = []
    try:
        subprocess.run(["groupadd", "--system", group], check=True)
        made.append(("groupdel", group))
        for u, extra in ((member, ["-G", group]), (other, [])):
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh",
                            *extra, u], check=True)
            made.insert(0, ("userdel", u))
        yield group, member, other
    finally:
        for cmd, name in made:
            subprocess.run([cmd, name], capture_output=True)


def test_socket_group_member_may_use_isolad(staged, group_users):
    group, member, other = group_users
    install("--prefix", PREFIX, destdir=staged)
    p = staged / PREFIX.lstrip("/")
    isola = p / "bin/isola"
    state = Path(tempfile.mkdtemp(prefix="isola-inst-st-", dir="/tmp"))
    # The socket's own directory, 0700 like a fresh /run/isola: isolad lets the group through.
    run = Path(tempfile.mkdtemp(prefix="isola-inst-run-", dir="/tmp"))
    sock = run / "isolad.sock"
    log = open(state / "isolad.log", "wb")
    # The installed isolad, without --agent: it must find the installed agent by itself.
    d = subprocess.Popen([str(p / "bin/isolad"), "--state-dir", str(state), "--socket", str(sock),
                          "--socket-group", group] + ROOT_CONFTEST.UID_BASE_ARGS,
                         stdout=log, stderr=log,
                         start_new_session=True)
    try:
        ic.wait_for(lambda: sock.exists() or d.poll() is not None, 60, what="isolad's socket")
        assert d.poll() is None, (state / "isolad.log").read_text()
        st = sock.stat()
        assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
        assert st.st_gid == int(subprocess.check_output(["getent", "group", group],
                                                         text=True).split(":")[2])
        r = run_as(member, isola, "--socket", sock, "run", "--", "echo", "hi from a member")
        assert r.returncode == 0 and "hi from a member" in r.stdout, r
        r = run_as(other, isola, "--socket", sock, "ls")
        assert r.returncode != 0, r
        assert "add yourself to group isola" in r.stderr, r.stderr
        r = run_as(member, isola, "--socket", run / "nosuch.sock", "ls")
        assert r.returncode != 0 and "is isolad running?" in r.stderr, r.stderr
    finally:
        d.terminate()
        try:
            d.wait(30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait(10)
        log.close()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)
        install("--prefix", PREFIX, "--uninstall", destdir=staged, check=False)


def test_isolad_refuses_an_unknown_socket_group():
    cp = subprocess.run([str(ROOT_CONFTEST.ISOLAD), "--socket-group", "no-such-group-xyz"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 2 and "no such group" in cp.stderr, cp
