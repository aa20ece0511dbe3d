# SPDX-License-Identifier: Apache-2.0
"""Host uid ranges per isolad (docs/process-tier.md "Host uid ranges"): `isolad --uid-base N`
moves every sandbox's 65536 host ids to N + slot x 65536, so two isolads on one host never hand
out the same host uids; a bad N is refused by name; a state dir that holds sandboxes keeps the
base its sandboxes run with. Judged by the uid map inside the sandbox and the host uid of its
processes."""

import os
import subprocess

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST

pytestmark = pytest.mark.tiers("process")

DEFAULT = int(os.environ.get("ISOLA_TEST_UID_BASE") or 1048576)
OTHER = DEFAULT + (4096 << 16) if DEFAULT + (8192 << 16) < 2**32 else 1048576


def uid_map_base(api, sid):
    """The host uid that id 0 of the sandbox maps to, read inside the sandbox."""
    first = api.sh(sid, "cat /proc/self/uid_map").split()
    assert first[0] == "0" and first[2] == "65536", first
    return int(first[1])


def test_two_isolads_use_disjoint_host_uids(isolad):
    other = ROOT_CONFTEST.Isolad(extra_args=["--uid-base", OTHER])
    try:
        a, b = isolad.client(), other.client()
        sa, sb = a.create_sandbox()["id"], b.create_sandbox()["id"]
        try:
            base_a, base_b = uid_map_base(a, sa), uid_map_base(b, sb)
            assert DEFAULT <= base_a < DEFAULT + (4096 << 16), base_a
            assert OTHER <= base_b < OTHER + (4096 << 16), base_b
            # The sandbox's processes run as those host uids.
            pids = ic.sandbox_host_pids(sb)
            assert pids and all(OTHER <= ic.host_uid(p) < OTHER + (4096 << 16) for p in pids)
        finally:
            a.delete_sandbox(sa)
            b.delete_sandbox(sb)
    finally:
        other.stop()
    assert not other.new_sanitizer_reports()


@pytest.mark.parametrize("bad", ["5", "1048577", "-1048576", "0x100000", "", "4026531840",
                                 "99999999999999999999"])
def test_bad_uid_base_is_refused_by_name(bad, tmp_path):
    d = tmp_path / "s"
    r = subprocess.run([str(ROOT_CONFTEST.ISOLAD), "--state-dir", str(d), "--socket",
                        str(d / "sock"), "--uid-base", bad],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert f"--uid-base `{bad}` must be a multiple of 65536" in r.stderr, r.stderr
    assert not d.exists(), "a refused start touched the state dir"


def test_state_dir_keeps_the_base_its_sandboxes_use():
    d = ROOT_CONFTEST.Isolad()
    try:
        c = d.client()
        sid = c.create_sandbox()["id"]
        base = uid_map_base(c, sid)
        d.stop()
        own_args = list(d.extra_args)
        # Another base while a sandbox of this state dir lives: refused, naming the base.
        d.extra_args += ["--uid-base", str(OTHER)]
        with pytest.raises(pytest.fail.Exception) as e:
            d.start()
        assert f"run as host uids from {DEFAULT}" in str(e.value), str(e.value)
        assert f"--uid-base {DEFAULT}" in str(e.value), str(e.value)
        # The old base still works and the sandbox is there, unchanged.
        d.extra_args = own_args
        d.start()
        c = d.client()
        assert uid_map_base(c, sid) == base
        c.delete_sandbox(sid)
        d.stop()
        # With no sandbox left the base may change; new sandboxes use it.
        d.extra_args += ["--uid-base", str(OTHER)]
        d.start()
        c = d.client()
        sid = c.create_sandbox()["id"]
        assert OTHER <= uid_map_base(c, sid) < OTHER + (4096 << 16)
        c.delete_sandbox(sid)
    finally:
        d.discard()
