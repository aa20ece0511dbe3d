# SPDX-License-Identifier: Apache-2.0
"""Root's capabilities stay inside the boundary: no never-listed capability in any set of any
process, whatever cap_add asks; cap_add of one is refused naming it; cap_drop ALL leaves root
nothing; namespaces, mounts and ptrace stay refused to a root holding the most cap_add allows;
file capabilities and setuid bits gain nothing beyond the bounding set. Judged by the static
probe's /proc/self/status and syscall sweep (docs/process-tier.md, "Capabilities")."""

import errno

import pytest

from seclib import NEVER_CAPS, OPT_IN_CAPS, ROOT_CAPS, install_probe, run_probe

SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
NEVER_MASK = sum(1 << c for c in NEVER_CAPS)
MOST = ROOT_CAPS | sum(1 << c for c in OPT_IN_CAPS)


@pytest.fixture
def most_caps(make_sandbox):
    """A sandbox whose root holds the default set plus every opt-in capability."""
    return make_sandbox(cap_add=list(OPT_IN_CAPS.values()))


def sets_of(api, sid, user=None, path=None):
    st = run_probe(api, sid, "status", user=user, path=path)["status"]
    return {k: int(st[k][0], 16) for k in SETS}


def never_held(sets, where):
    for k, v in sets.items():
        held = [NEVER_CAPS[c] for c in NEVER_CAPS if v & (1 << c)]
        assert not held, f"{where}: {k} holds {held}"


@pytest.mark.parametrize("user", ["root", "user"])
def test_no_never_listed_capability_in_any_set(api, sandbox, most_caps, user):
    for sid, root_set in ((sandbox["id"], ROOT_CAPS), (most_caps["id"], MOST)):
        sets = sets_of(api, sid, user=user)
        never_held(sets, f"{sid} as {user}")
        held = root_set if user == "root" else 0
        assert (sets["CapEff"], sets["CapPrm"], sets["CapBnd"]) == (held, held, root_set), \
            {k: hex(v) for k, v in sets.items()}
        assert sets["CapInh"] == sets["CapAmb"] == 0, sets


@pytest.mark.parametrize("cap", sorted(NEVER_CAPS.values()) + ["ALL"])
def test_cap_add_of_a_never_listed_capability_is_refused(api, cap):
    r = api.request("POST", "/v1/sandboxes", json={"cap_add": [cap.lower()]})
    assert r.status == 400, r
    assert "cap_add" in r.error_message and cap in r.error_message.upper(), r.error_message
    assert r.error_code == "invalid", r


def test_cap_drop_all_leaves_root_nothing(api, make_sandbox):
    sid = make_sandbox(cap_drop=["ALL"])["id"]
    sets = sets_of(api, sid)
    assert all(v == 0 for v in sets.values()), {k: hex(v) for k, v in sets.items()}
    res = api.exec(sid, cmd=["sh", "-c", "touch /tmp/f && chown 1000 /tmp/f"])
    assert res["exit_code"] != 0 and "Operation not permitted" in res["stderr"], res
    res = api.exec(sid, cmd=["cat", "/etc/passwd"], user="root")
    assert res["exit_code"] == 0, res  # still a working root for what needs no privilege


# What root holding the most cap_add allows must still not do (the probe's sweep).
STILL_REFUSED = ["unshare_user", "unshare_ns", "unshare_net", "clone_newuser", "clone_newns",
                 "setns", "mount", "umount2", "pivot_root", "fsopen", "open_tree", "ptrace",
                 "process_vm_readv", "pidfd_getfd", "bpf", "perf_event_open", "init_module",
                 "open_by_handle_at", "reboot", "settimeofday", "socket_af_packet",
                 "ioctl_tiocsti"]


def test_namespaces_mounts_and_ptrace_stay_refused_to_root(api, most_caps):
    p = run_probe(api, most_caps["id"])
    for name in STILL_REFUSED:
        ev = p["syscall"][name]
        assert ev["ret"] == -1 and ev["errno"] == errno.EPERM, (name, ev)
    for cmd in (["unshare", "-r", "true"], ["unshare", "-m", "true"],
                ["mount", "-t", "tmpfs", "none", "/mnt"]):
        res = api.exec(most_caps["id"], cmd=cmd)
        assert res["exit_code"] != 0, (cmd, res)


def test_file_capabilities_and_setuid_gain_nothing_beyond_the_bounding_set(api, sandbox):
    """Root may write file capabilities (CAP_SETFCAP, namespaced to the sandbox's root) and
    setuid bits; running such a file, as root or as a user, adds nothing: no_new_privs, the
    nosuid layers and the bounding set each forbid it."""
    sid = sandbox["id"]
    install_probe(api, sid, "/tmp/p")
    res = api.sh(sid, "cp /tmp/p /tmp/fcap && chmod 4755 /tmp/fcap && "
                      "setcap cap_sys_admin,cap_net_raw,cap_sys_ptrace,cap_chown+eip /tmp/fcap "
                      "&& getcap /tmp/fcap; echo rc=$?")
    assert "rc=0" in res and "cap_sys_admin" in res, res  # the attack is really set up
    for user, held in (("root", ROOT_CAPS), ("user", 0)):
        sets = sets_of(api, sid, user=user, path="/tmp/fcap")
        never_held(sets, f"file caps as {user}")
        assert sets["CapEff"] == sets["CapPrm"] == held, (user, {k: hex(v) for k, v in
                                                              sets.items()})
        assert sets["CapBnd"] == ROOT_CAPS and sets["CapAmb"] == 0, (user, sets)
