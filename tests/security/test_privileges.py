# SPDX-License-Identifier: Apache-2.0
"""Setuid binaries gain nothing inside a sandbox: the host's own setuid programs (bound from
/usr) and a setuid-root copy made by the sandbox's root, run as an ordinary user, keep that
user's uid in every slot and no capability — judged by the probe and, for the host's su,
from the host's /proc."""

import os
import re
import time

import pytest

import isola_client as ic
from seclib import ROOT_CAPS, install_probe, run_probe

HOST_SETUID = [p for p in ("/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount",
                           "/usr/bin/newgrp", "/usr/bin/chfn")
               if os.path.exists(p) and os.stat(p).st_mode & 0o4000]


def test_setuid_copy_made_by_sandbox_root_gains_nothing(api, sandbox):
    sid = sandbox["id"]
    install_probe(api, sid, "/tmp/p")
    api.sh(sid, "cp /tmp/p /tmp/suid && chown 0:0 /tmp/suid && chmod 6755 /tmp/suid && "
                "mkdir -p /tmp/u && chmod 777 /tmp/u")
    # The bits really are set (or the test would prove nothing).
    mode = api.sh(sid, "stat -c %a:%u /tmp/suid").strip()
    assert mode == "6755:0", mode
    p = run_probe(api, sid, "status", user="user", path="/tmp/suid")
    st = p["status"]
    assert st["Uid"] == ["1000"] * 4, f"setuid root copy changed the uid: {st['Uid']}"
    assert st["Gid"] == ["1000"] * 4, f"setgid root copy changed the gid: {st['Gid']}"
    for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(st[cap][0], 16) == 0, f"{cap} = {st[cap]}"
    assert int(st["CapBnd"][0], 16) == ROOT_CAPS, st["CapBnd"]


@pytest.mark.skipif(not HOST_SETUID, reason="the host has none of su, passwd, mount setuid")
def test_host_setuid_binaries_gain_nothing(api, sandbox):
    sid = sandbox["id"]
    # They are there, setuid root, as on the host (nosuid on the bind does the work).
    for path in HOST_SETUID:
        out = api.sh(sid, f"stat -c %a:%u {path}").strip()
        assert out.startswith("4") and out.endswith(":0"), (path, out)
    if "/usr/bin/mount" in HOST_SETUID:
        res = api.exec(sid, cmd=["mount", "-t", "tmpfs", "none", "/tmp"], user="user")
        assert res["exit_code"] != 0, res
    # su waiting for a password on a PTY: its credentials, read from the host.
    if "/usr/bin/su" not in HOST_SETUID:
        return
    init = ic.sandbox_init_pid(sid)
    base = ic.uid_map(init)[0][1]
    pid = api.start_process(sid, cmd=["su", "root", "-c", "true"], user="user", tty=True)["pid"]
    try:
        def su_pids():
            out = []
            for hp in ic.sandbox_host_pids(sid):
                try:
                    exe = os.readlink(f"/proc/{hp}/exe")
                except OSError:
                    continue
                if exe.endswith("/su"):
                    out.append(hp)
            return out
        found = ic.wait_for(su_pids, 15, what="su to appear on the host")
        time.sleep(0.3)  # past execve: the credentials su runs with
        for hp in found:
            st = ic.proc_status(hp)
            assert st, "su exited before it could be inspected"
            uids = [int(u) for u in st["Uid"].split()]
            assert uids == [base + 1000] * 4, f"su runs with host uids {uids} (base {base})"
            assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, st
            assert st["NoNewPrivs"] == "1", st
    finally:
        api.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal",
                    json={"signal": "KILL"})


def test_setuid_in_writable_layer_does_not_help_root_either(api, sandbox):
    """Sandbox root running a setuid-root binary holds the default set and nothing beyond
    it: the bounding set is that set, and no_new_privs forbids any gain at execve."""
    sid = sandbox["id"]
    install_probe(api, sid, "/tmp/p")
    api.sh(sid, "cp /tmp/p /tmp/suid2 && chmod 4755 /tmp/suid2")
    st = run_probe(api, sid, "status", path="/tmp/suid2")["status"]
    for cap in ("CapPrm", "CapEff", "CapBnd"):
        assert int(st[cap][0], 16) == ROOT_CAPS, f"{cap} = {st[cap]}"
    for cap in ("CapInh", "CapAmb"):
        assert int(st[cap][0], 16) == 0, f"{cap} = {st[cap]}"
    assert re.fullmatch(r"0", st["Uid"][1]), st["Uid"]
