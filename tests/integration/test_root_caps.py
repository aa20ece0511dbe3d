# SPDX-License-Identifier: Apache-2.0
"""Root in a process sandbox can do root's work: it holds the default capability set in the
sandbox's user namespace (chown, tar -xp, runuser, dpkg and apt installs), other users hold
none, and cap_add/cap_drop on create change the set and survive hibernate, fork and an isolad
restart (docs/process-tier.md, "Capabilities"). Through the Python SDK and the CLI."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
import isola  # noqa: E402  (the SDK users use)
from isola import errors  # noqa: E402

from faults_util import cli as run_cli  # noqa: E402

pytestmark = pytest.mark.tiers("process")

# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT
# AUDIT_WRITE SETFCAP
DEFAULT = {0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31}
DEFAULT_MASK = sum(1 << c for c in DEFAULT)
DEFAULT_NAMES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
                 "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                 "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE", "CAP_SETFCAP"]


@pytest.fixture
def sdk(isolad):
    return isola.Client(socket_path=isolad.socket, timeout=120)


@pytest.fixture
def sb(sdk):
    s = sdk.create_sandbox(tier="process")
    yield s
    s.delete()


def caps_of(sb, user=None):
    """The five capability sets of a command run as user, from its /proc/self/status."""
    res = sb.exec(["grep", "^Cap", "/proc/self/status"], user=user)
    assert res.exit_code == 0, res
    return {ln.split(":")[0]: int(ln.split()[1], 16) for ln in res.stdout.splitlines()}


def ok(sb, script, user=None, timeout=None):
    res = sb.exec(script, user=user, timeout=timeout)
    assert res.exit_code == 0, f"{script!r} -> {res.exit_code}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_root_holds_the_default_set_and_inspect_names_it(sb):
    st = caps_of(sb)
    assert st["CapEff"] == st["CapPrm"] == st["CapBnd"] == DEFAULT_MASK, {
        k: hex(v) for k, v in st.items()}
    assert st["CapInh"] == 0 and st["CapAmb"] == 0, st
    assert sb.refresh().capabilities == DEFAULT_NAMES


def test_other_users_hold_none(sb):
    st = caps_of(sb, user="user")
    assert st["CapEff"] == st["CapPrm"] == st["CapInh"] == st["CapAmb"] == 0, st
    assert st["CapBnd"] == DEFAULT_MASK, hex(st["CapBnd"])


def test_chown_chmod_utime_as_root(sb):
    out = ok(sb, "set -e; cd /tmp; echo x > f; chown 1000:1000 f; chown 42:100 f; "
                 "chmod 2750 f; touch -d '2001-02-03 04:05:06 UTC' f; chgrp 0 f; "
                 "mkdir d; chown user d; su_f=$(stat -c %u:%g:%a:%Y f); echo $su_f; "
                 "stat -c %U d")
    assert out.split() == ["42:0:750:981173106", "user"], out  # chgrp clears setgid


def test_tar_xp_preserves_owners_and_python_tarfile_applies_modes(sb):
    # An archive with owners the sandbox's map covers: root, _apt-like 42:65534, user, 5000.
    ok(sb, r"""set -e
python3 - <<'EOF'
import io, tarfile
with tarfile.open('/tmp/t.tar', 'w') as t:
    for name, uid, gid, mode in (('a', 0, 0, 0o644), ('b', 42, 65534, 0o600),
                                 ('c', 1000, 1000, 0o4755), ('d', 5000, 5001, 0o640)):
        ti = tarfile.TarInfo(name); ti.size = 1; ti.uid, ti.gid, ti.mode = uid, gid, mode
        ti.mtime = 1000000000
        t.addfile(ti, io.BytesIO(b'x'))
EOF
mkdir /tmp/x /tmp/y
tar -xpf /tmp/t.tar -C /tmp/x
python3 -c "import tarfile; tarfile.open('/tmp/t.tar').extractall('/tmp/y')"
""")
    for d in ("/tmp/x", "/tmp/y"):
        out = ok(sb, f"cd {d} && stat -c '%n %u:%g %a %Y' a b c d")
        assert out.splitlines() == ["a 0:0 644 1000000000", "b 42:65534 600 1000000000",
                                    "c 1000:1000 4755 1000000000",
                                    "d 5000:5001 640 1000000000"], (d, out)


def install_pam(sb):
    """The host template has no /etc/pam.d; runuser needs its PAM stack (as any Debian
    image has it): the host's own files, copied in."""
    ok(sb, "mkdir -p /etc/pam.d /etc/security")
    for name in ("pam.d/runuser", "pam.d/other", "pam.d/common-auth", "pam.d/common-account",
                 "pam.d/common-session", "pam.d/common-session-noninteractive",
                 "pam.d/common-password", "security/limits.conf"):
        p = Path("/etc") / name
        if p.exists():
            sb.files.write(f"/etc/{name}", p.read_bytes())


def test_runuser_switches_to_user_who_holds_nothing(sb):
    if sb.exec("id -u user").exit_code != 0:
        ok(sb, "useradd -m -u 1000 user")
    install_pam(sb)
    assert ok(sb, "runuser -u user -- id -u").strip() == "1000"
    out = ok(sb, "runuser -u user -- grep ^CapEff /proc/self/status")
    assert int(out.split()[1], 16) == 0, out
    out = ok(sb, "runuser -u user -- grep ^CapBnd /proc/self/status")
    assert int(out.split()[1], 16) == DEFAULT_MASK, out


def test_chroot_into_own_tree(sb):
    """chroot(2): root holds CAP_SYS_CHROOT and the filter allows the call."""
    ok(sb, "mkdir -p /tmp/r/inside")
    out = ok(sb, ["python3", "-c",
                  "import os; os.chroot('/tmp/r'); os.chdir('/'); os.chdir('../..'); "
                  "print(os.listdir('.'))"])
    assert out.strip() == "['inside']", out


def test_cap_drop_all_leaves_root_nothing(sdk):
    with sdk.create_sandbox(tier="process", cap_drop=["ALL"]) as sb:
        st = caps_of(sb)
        assert all(v == 0 for v in st.values()), st
        res = sb.exec("touch /tmp/f && chown 1000 /tmp/f")
        assert res.exit_code != 0 and "Operation not permitted" in res.stderr, res
        assert sb.refresh().capabilities == []


def test_cap_drop_then_add_and_names_in_any_form(sdk):
    with sdk.create_sandbox(tier="process", cap_drop=["all"], cap_add=["chown", "CAP_Kill",
                                                                        "sys_nice"]) as sb:
        want = (1 << 0) | (1 << 5) | (1 << 23)
        st = caps_of(sb)
        assert st["CapEff"] == st["CapBnd"] == want, {k: hex(v) for k, v in st.items()}
        assert sb.refresh().capabilities == ["CAP_CHOWN", "CAP_KILL", "CAP_SYS_NICE"]


@pytest.mark.parametrize("name", ["SYS_ADMIN", "cap_net_admin", "SYS_PTRACE", "SYS_MODULE",
                                  "SYS_RAWIO", "BPF", "PERFMON", "NET_RAW", "MKNOD",
                                  "SYS_TIME", "SYS_BOOT", "MAC_ADMIN", "SYSLOG", "ALL"])
def test_cap_add_never_listed_is_refused_naming_it(sdk, name):
    with pytest.raises(errors.InvalidError) as ei:
        sdk.create_sandbox(tier="process", cap_add=[name])
    msg = str(ei.value)
    assert "cap_add" in msg and name.upper().removeprefix("CAP_") in msg.upper(), msg


@pytest.mark.parametrize("field", ["cap_add", "cap_drop"])
def test_unknown_capability_is_refused_naming_it(sdk, field):
    with pytest.raises(errors.InvalidError) as ei:
        sdk.create_sandbox(tier="process", **{field: ["CAP_FLY"]})
    assert field in str(ei.value) and "CAP_FLY" in str(ei.value), str(ei.value)


def test_cli_cap_options(isolad):
    r = run_cli(isolad, "run", "--cap-add", "sys_admin", "--", "true")
    assert r.returncode != 0 and "CAP_SYS_ADMIN" in r.stderr, r
    r = run_cli(isolad, "run", "--cap-drop", "ALL", "--", "grep", "^CapEff", "/proc/self/status")
    assert r.returncode == 0 and int(r.stdout.split()[1], 16) == 0, r
    r = run_cli(isolad, "--json", "create", "--cap-drop", "CHOWN", "--cap-add", "NET_BROADCAST")
    assert r.returncode == 0, r
    import json
    info = json.loads(r.stdout)
    try:
        assert "CAP_CHOWN" not in info["capabilities"], info
        assert "CAP_NET_BROADCAST" in info["capabilities"], info
        r = run_cli(isolad, "--json", "inspect", info["id"])
        assert r.returncode == 0 and json.loads(r.stdout)["capabilities"] == \
            info["capabilities"], r
    finally:
        run_cli(isolad, "rm", info["id"])


def test_caps_survive_hibernate_fork_and_restart(isolad, sdk):
    want = DEFAULT_MASK & ~(1 << 0) | (1 << 23)  # no CHOWN, plus SYS_NICE
    sb = sdk.create_sandbox(tier="process", cap_drop=["CHOWN"], cap_add=["SYS_NICE"])
    forks = []
    try:
        assert caps_of(sb)["CapEff"] == want
        sb.hibernate()
        sb.resume()
        assert caps_of(sb)["CapEff"] == want, "after hibernate"
        forks = sb.fork(1)
        assert caps_of(forks[0])["CapEff"] == want, "in a fork"
        isolad.restart()
        again = sdk.get_sandbox(sb.id)
        assert "CAP_CHOWN" not in again.info.capabilities, again.info
        again.hibernate()
        again.resume()
        assert caps_of(again)["CapEff"] == want, "hibernate after an isolad restart"
    finally:
        for f in forks:
            f.delete()
        sb.delete()


@pytest.mark.tiers("process", "microvm")
def test_create_options_apply_on_every_tier(sdk, tier):
    """The microvm tier's guest agent gets the set on the kernel command line (isola.caps=)
    and applies it as the process tier's agent does."""
    with sdk.create_sandbox(tier=tier, cap_drop=["ALL"], cap_add=["CHOWN"]) as sb:
        st = caps_of(sb)
        assert st["CapEff"] == st["CapPrm"] == st["CapBnd"] == 1, {
            k: hex(v) for k, v in st.items()}
        assert caps_of(sb, user="user")["CapEff"] == 0
        ok(sb, "touch /tmp/f && chown 42 /tmp/f")
        assert sb.exec("chmod 600 /tmp/f && chmod 644 /tmp/f", user="user").exit_code != 0
