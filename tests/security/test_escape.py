# SPDX-License-Identifier: Apache-2.0
"""Attacks from inside a process-tier sandbox with a static probe; the host judges.

The probe (tests/security/probe.c) reports its credentials, its open fds and the errno of
every call the seccomp policy must deny, made with invalid pointers so that a call the
filter let through fails differently (EFAULT, EBADF, EINVAL) from a denial (EPERM, or
ENOSYS for clone3).
"""

import errno
import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ISOLA_BUILD") or REPO / "build")
PROBE = BUILD / "tests" / "security" / "isola-probe"
# The ASan tree does not build static binaries; fall back to the normal tree's probe.
if not PROBE.exists():
    PROBE = REPO / "build" / "tests" / "security" / "isola-probe"

DENIED_EPERM = [
    "mount", "umount2", "pivot_root", "unshare_user", "unshare_ns", "setns", "clone_newuser",
    "io_uring_setup", "userfaultfd", "bpf", "perf_event_open", "keyctl", "add_key",
    "request_key", "ptrace", "process_vm_readv", "kexec_load", "init_module", "finit_module",
    "delete_module", "open_by_handle_at", "acct", "swapon", "reboot", "settimeofday",
    "clock_settime", "fsopen", "open_tree", "move_mount", "ioctl_tiocsti",
    "ioctl_tiocsti_high", "socket_af_packet", "socket_af_vsock",
]


def run_probe(api, sid):
    assert PROBE.exists(), f"probe binary {PROBE} missing: build first"
    api.write_file(sid, "/tmp/isola-probe", PROBE.read_bytes(), mode="0755")
    res = api.exec(sid, cmd=["/tmp/isola-probe"])
    assert res["exit_code"] == 0, res
    out = {"status": {}, "syscall": {}, "fd": []}
    for line in res["stdout"].splitlines():
        ev = json.loads(line)
        if ev["probe"] == "status":
            k, _, v = ev["line"].partition(":")
            out["status"][k] = v.split()
        elif ev["probe"] == "syscall":
            out["syscall"][ev["name"]] = ev
        elif ev["probe"] == "fd":
            out["fd"].append(ev)
    return out


@pytest.fixture
def probe(api, sandbox):
    return run_probe(api, sandbox["id"])


def test_status_no_privileges(probe):
    st = probe["status"]
    assert st["NoNewPrivs"] == ["1"], st
    assert st["Seccomp"] == ["2"], st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap][0], 16) == 0, f"{cap} = {st[cap]}"


@pytest.mark.parametrize("name", DENIED_EPERM)
def test_denied_syscall_is_the_filters_answer(probe, name):
    ev = probe["syscall"][name]
    assert ev["ret"] == -1 and ev["errno"] == errno.EPERM, (
        f"{name}: ret {ev['ret']} errno {ev['errno']} ({os.strerror(ev['errno'])}); "
        f"expected the filter's EPERM")


def test_clone3_answers_enosys(probe):
    ev = probe["syscall"]["clone3"]
    assert ev["ret"] == -1 and ev["errno"] == errno.ENOSYS, ev


def test_no_isolad_fd_leaks_into_sandbox(probe):
    assert probe["fd"] == [], f"fds inherited from isolad/agent: {probe['fd']}"


def host_uids_of(marker):
    """Host uids of processes whose command line contains marker."""
    uids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker not in cmd:
                continue
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        m = re.search(r"^Uid:\s+(\d+)", status, re.M)
        uids.append(int(m.group(1)))
    return uids


def test_unique_unprivileged_host_uid(api, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    uids = {}
    for sb, marker in ((a, "1001.25"), (b, "1001.75")):
        api.start_process(sb["id"], cmd=["sleep", marker])
        found = []
        for _ in range(100):
            found = host_uids_of(f"sleep {marker}")
            if found:
                break
            import time
            time.sleep(0.05)
        assert found, f"sandbox {sb['id']}: sleep {marker} not visible on the host"
        uids[sb["id"]] = found[0]
    ua, ub = uids[a["id"]], uids[b["id"]]
    assert ua != 0 and ub != 0, uids
    assert ua >= 65536 and ub >= 65536, f"sandbox uids must be outside host user ranges: {uids}"
    assert abs(ua - ub) >= 65536, f"sandboxes share a uid range: {uids}"


def test_control_socket_unreachable(api, sandbox, isolad):
    sid = sandbox["id"]
    script = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({isolad.socket!r}); print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n")
    res = api.exec(sid, cmd=["python3", "-c", script])
    assert "CONNECTED" not in res["stdout"], res
    res = api.exec(sid, cmd=["ls", isolad.state_dir])
    assert res["exit_code"] != 0, f"state dir visible inside: {res}"
    # No network path to the TCP API either: the sandbox has only loopback.
    script = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {isolad.port}), timeout=2); print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n")
    res = api.exec(sid, cmd=["python3", "-c", script])
    assert "CONNECTED" not in res["stdout"], res


def test_filesystem_view(api, sandbox):
    sid = sandbox["id"]
    res = api.exec(sid, cmd=["sh", "-c", "touch /sys/isola-x 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], f"/sys writable: {res}"
    res = api.exec(sid, cmd=["sh", "-c", "echo 1 > /proc/sys/kernel/panic 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], f"/proc/sys writable: {res}"
    res = api.exec(sid, cmd=["sh", "-c", "mkdir -p /tmp/p && mount -t proc proc /tmp/p 2>&1;"
                             " echo rc=$?"])
    assert "rc=0" not in res["stdout"], f"fresh procfs mountable: {res}"
    devs = set(api.exec(sid, cmd=["ls", "-A", "/dev"])["stdout"].split())
    forbidden = {d for d in devs if re.match(r"^(sd|vd|nvme|loop|mem|kmem|port|kmsg|mapper|"
                                              r"dm-|kvm|net|fuse|console)", d)}
    assert not forbidden, f"host devices visible in /dev: {forbidden}"
    for masked in ("/proc/keys", "/proc/timer_list", "/proc/interrupts"):
        res = api.exec(sid, cmd=["sh", "-c", f"cat {masked} 2>/dev/null | wc -c"])
        assert res["stdout"].strip() in ("0", ""), f"{masked} readable: {res}"


def test_writes_to_template_stay_in_sandbox(api, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    api.sh(a["id"], "echo owned > /etc/isola-marker && rm -f /etc/hosts")
    res = api.exec(b["id"], cmd=["sh", "-c", "cat /etc/isola-marker; cat /etc/hosts"])
    assert "owned" not in res["stdout"] and "localhost" in res["stdout"], res
    assert not os.path.exists("/etc/isola-marker")
    res = api.exec(a["id"], cmd=["sh", "-c", "touch /usr/bin/isola-x 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], f"host /usr writable from inside: {res}"
    assert not os.path.exists("/usr/bin/isola-x")
