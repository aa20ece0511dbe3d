# SPDX-License-Identifier: Apache-2.0
"""Isolad.discard() (tests/conftest.py), the one way a test throws away an isolad of its own:
it destroys the sandboxes, stops isolad, fails on what the session isolad's teardown fails on
(a sanitizer report, a mount still referencing the state dir, with expect_running a dead
isolad) and removes the state dir unless it is to be kept (keep_state, ISOLA_KEEP_STATE or a
problem, named in the failure)."""

import os
import shutil
import subprocess

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

Isolad = ROOT_CONFTEST.Isolad


def test_discard_destroys_stops_removes_and_is_idempotent():
    d = Isolad()
    c = d.client()
    sid = c.create_sandbox()["id"]
    assert ic.cgroup_dirs(sid), "the premise: the sandbox has a cgroup"
    d.discard()
    assert not d.alive() and d.proc.returncode == 0
    assert not ic.cgroup_dirs(sid), "the sandbox outlived the discard"
    assert not os.path.exists(d.state_dir)
    assert d.discard_problems() == []
    d.discard()


def test_a_mount_left_in_the_state_dir_fails_and_keeps_it():
    d = Isolad()
    mnt = os.path.join(d.state_dir, "left")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], check=True)
    try:
        with pytest.raises(pytest.fail.Exception) as ei:
            d.discard()
        msg = str(ei.value)
        assert f"mounts still reference the state dir {d.state_dir}" in msg and mnt in msg, msg
        assert f"(state and logs kept in {d.state_dir})" in msg, msg
        assert os.path.isdir(mnt) and not d.alive()
    finally:
        subprocess.run(["umount", "-l", mnt], check=True)
        shutil.rmtree(d.state_dir, ignore_errors=True)


def test_a_sanitizer_report_in_the_log_fails_and_keeps_the_state():
    d = Isolad()
    assert d.stop() == 0  # else isolad's own writes (at its offset, not appended) overwrite it
    with open(d.logs[-1], "a") as f:
        f.write("==1==ERROR: AddressSanitizer: heap-use-after-free (written by the test)\n")
    try:
        problems = d.discard_problems()
        assert any(p.startswith("sanitizer report from isolad: ") and "heap-use-after-free" in p
                   for p in problems), problems
        assert problems[-1] == f"(state and logs kept in {d.state_dir})", problems
        assert os.path.isdir(d.state_dir) and not d.alive()
    finally:
        shutil.rmtree(d.state_dir, ignore_errors=True)


def test_a_dead_isolad_is_a_problem_only_when_it_was_expected_to_run():
    d = Isolad()
    d.stop(kill9=True)
    problems = d.discard_problems(expect_running=True)
    assert problems and problems[0].startswith(
        f"isolad was not running when discarded (status {d.proc.returncode})"), problems
    assert os.path.isdir(d.state_dir)
    shutil.rmtree(d.state_dir)
    e = Isolad()
    e.stop(kill9=True)
    assert e.discard_problems() == []
    assert not os.path.exists(e.state_dir)
    # Neither killed isolad's nftables table is left on the host.
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                            check=True, timeout=30).stdout
    assert ic.nft_table(d.state_dir) not in tables and ic.nft_table(e.state_dir) not in tables


def test_keep_state_and_isola_keep_state_keep_the_dir(monkeypatch):
    d = Isolad()
    try:
        d.discard(keep_state=True)
        assert not d.alive() and os.path.isdir(d.state_dir)
    finally:
        shutil.rmtree(d.state_dir, ignore_errors=True)
    e = Isolad()
    monkeypatch.setenv("ISOLA_KEEP_STATE", "1")
    try:
        e.discard()
        assert not e.alive() and os.path.isdir(e.state_dir)
    finally:
        shutil.rmtree(e.state_dir, ignore_errors=True)


def test_a_given_state_dir_that_is_a_mount_point_is_the_callers():
    mnt = "/tmp/isola-dc-" + os.urandom(4).hex()
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", mnt],
                   check=True)
    try:
        d = Isolad(state_dir=mnt)
        d.discard(keep_state=True)
        assert not d.alive() and os.path.ismount(mnt)
    finally:
        subprocess.run(["umount", "-l", mnt], check=True)
        os.rmdir(mnt)
