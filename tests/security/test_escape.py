# SPDX-License-Identifier: Apache-2.0
"""Attacks from inside a process-tier sandbox with a static probe; the host judges.

The probe (tests/security/probe.c) reports its credentials, session, open fds and the errno
of every call the seccomp policy must deny, made so that a call the filter let through
fails differently (EFAULT, EBADF, EINVAL, ENOTTY) from a denial (EPERM, or ENOSYS for
clone3). The compiled filter's verdict for every syscall number is proven separately by
tests/unit/process/test_seccomp_bpf.c.
"""

import errno
import os
import re
import time
from pathlib import Path

import pytest

import isola_client as ic
from seclib import ROOT_CAPS, parse_probe, run_probe

# Issue 3's list, each as the probe attempts it.
DENIED_EPERM = [
    # namespaces: unshare and clone with every CLONE_NEW* flag, setns
    "unshare_user", "unshare_ns", "unshare_net", "unshare_pid", "unshare_ipc", "unshare_uts",
    "unshare_cgroup", "unshare_time", "clone_newuser", "clone_newns", "clone_newnet",
    "clone_newpid", "clone_newipc", "clone_newuts", "clone_newcgroup", "setns",
    # every mount API
    "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr",
    # io_uring, userfaultfd, bpf, perf, keys
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key",
    # other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    # kexec, modules, handles, accounting, swap, reboot, clocks
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "acct", "swapon", "swapoff", "reboot",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "sethostname",
    # terminal injection, on 32 bits
    "ioctl_tiocsti", "ioctl_tiocsti_high", "ioctl_tioclinux", "ioctl_tioclinux_high",
    # socket families
    "socket_af_packet", "socket_af_vsock",
    "socket_af_netlink_netfilter", "socket_af_alg", "socket_af_key",
]


@pytest.fixture
def probe(api, sandbox):
    return run_probe(api, sandbox["id"])


def test_status_root_holds_only_the_default_set(probe):
    """Root holds the documented default set in its user namespace, nothing inheritable or
    ambient; no_new_privs and the filter are on (docs/process-tier.md, "Capabilities")."""
    st = probe["status"]
    assert st["NoNewPrivs"] == ["1"], st
    assert st["Seccomp"] == ["2"], st
    assert st["Seccomp_filters"] == ["1"], st
    for cap in ("CapPrm", "CapEff", "CapBnd"):
        assert int(st[cap][0], 16) == ROOT_CAPS, f"{cap} = {st[cap]}"
    for cap in ("CapInh", "CapAmb"):
        assert int(st[cap][0], 16) == 0, f"{cap} = {st[cap]}"


@pytest.mark.parametrize("user", ["root", "user"])
def test_every_exec_path_has_no_privileges(api, sandbox, user):
    """Foreground exec, background process and PTY process, as root and as a user: root holds
    the default set and nothing more, a user holds nothing (the bounding set is the default
    set for both), nothing inheritable or ambient; no_new_privs, the filter, a session of its
    own."""
    sid = sandbox["id"]
    run_probe(api, sid, "status")  # installs /tmp/isola-probe
    api.exec(sid, cmd=["chmod", "0755", "/tmp/isola-probe"], user="root")
    outs = [api.exec(sid, cmd=["/tmp/isola-probe", "status"], user=user)["stdout"]]
    for tty in (False, True):
        pid = api.start_process(sid, cmd=["/tmp/isola-probe", "status"], user=user,
                                tty=tty)["pid"]
        ex = api.wait_process(sid, pid, timeout=30)
        assert ex["exit_code"] == 0, ex
        r = api.request("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output")
        assert r.status == 200, r
        outs.append(r.json()["stdout"])
    for i, out in enumerate(outs):
        p = parse_probe(out.replace("\r\n", "\n"))
        st = p["status"]
        where = ["exec", "process", "pty process"][i]
        assert st["NoNewPrivs"] == ["1"] and st["Seccomp"] == ["2"], (where, st)
        held = ROOT_CAPS if user == "root" else 0
        for cap, want_caps in (("CapInh", 0), ("CapPrm", held), ("CapEff", held),
                               ("CapBnd", ROOT_CAPS), ("CapAmb", 0)):
            assert int(st[cap][0], 16) == want_caps, f"{where} as {user}: {cap} = {st[cap]}"
        want = "0" if user == "root" else "1000"
        assert st["Uid"] == [want] * 4, (where, st["Uid"])
        s = p["session"]
        assert s["sid"] == s["pid"], f"{where}: not a session leader: {s}"


@pytest.mark.parametrize("name", DENIED_EPERM)
def test_denied_syscall_is_the_filters_answer(probe, name):
    ev = probe["syscall"][name]
    assert ev["ret"] == -1 and ev["errno"] == errno.EPERM, (
        f"{name}: ret {ev['ret']} errno {ev['errno']} ({os.strerror(ev['errno'])}); "
        f"expected the filter's EPERM")


def test_audit_socket_answers_as_a_kernel_without_audit(probe):
    """Refused, with EPROTONOSUPPORT so libpam (runuser, su) goes on without audit; a socket
    the filter let through would have been created."""
    ev = probe["syscall"]["socket_af_netlink_audit"]
    assert ev["ret"] == -1 and ev["errno"] == errno.EPROTONOSUPPORT, ev


def test_clone3_answers_enosys(probe):
    ev = probe["syscall"]["clone3"]
    assert ev["ret"] == -1 and ev["errno"] == errno.ENOSYS, ev


def test_foreign_abis_refused_without_killing(api, sandbox, probe):
    """x32 calls get the filter's EPERM (the caller is not killed); i386 int 0x80 never
    runs: EPERM where the kernel has ia32 emulation, SIGSEGV from the kernel where not.
    The sandbox's agent is unaffected by any of the probe's attempts."""
    x32, i386 = probe["abi"]["x32"], probe["abi"]["i386"]
    assert x32["signal"] == 0 and x32["ret"] == -1 and x32["errno"] == errno.EPERM, x32
    assert (i386["signal"] == 0 and i386["ret"] == -1 and i386["errno"] == errno.EPERM) or \
        i386["signal"] == 11, i386
    init = ic.sandbox_init_pid(sandbox["id"])
    assert api.exec(sandbox["id"], cmd=["echo", "alive"])["stdout"] == "alive\n"
    assert ic.sandbox_init_pid(sandbox["id"]) == init, "the agent was replaced"


def test_no_isolad_fd_leaks_into_sandbox(probe):
    assert probe["fd"] == [], f"fds inherited from isolad/agent: {probe['fd']}"


# What the agent (PID 1) may hold: its stdio on /dev/null, its event loop, its listening
# socket and isolad's connection, and per process the pipes or PTY masters it serves.
AGENT_FD = re.compile(r"^(/dev/null|/dev/pts/ptmx|socket:\[\d+\]|pipe:\[\d+\]|"
                      r"anon_inode:\[(eventpoll|signalfd|timerfd|pidfd|eventfd)\]|"
                      r"anon_inode:inotify)$")


def fd_targets(pid):
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def test_agent_pid1_holds_nothing_of_isolads(api, isolad, sandbox):
    """Judged from the host: /proc/<agent>/fd lists only what the agent is supposed to hold,
    and none of its sockets is one of isolad's (CVE-2024-21626 class)."""
    sid = sandbox["id"]
    api.start_process(sid, cmd=["sleep", "60"])
    api.start_process(sid, cmd=["cat"], tty=True)
    init = ic.sandbox_init_pid(sid)
    fds = fd_targets(init)
    assert [fds.get(i) for i in (0, 1, 2)] == ["/dev/null"] * 3, fds
    # fd 3: the root of the sandbox's own writable tmpfs, kept for isolad's snapshots after a
    # restart (test_persist_agent_fd.py shows nothing in the sandbox reaches it).
    if fds.get(3) == "/" and set(os.listdir(f"/proc/{init}/fd/3")) == {
            "lower", "upper", "work", "root"}:
        del fds[3]
    bad = {fd: t for fd, t in fds.items() if not AGENT_FD.match(t)}
    assert not bad, f"the sandbox's PID 1 holds unexpected fds: {bad}"
    mine = {t for t in fd_targets(isolad.pid).values() if t.startswith("socket:")}
    shared = mine & {t for t in fds.values() if t.startswith("socket:")}
    assert not shared, f"isolad and the agent share socket(s) {shared}"
    # Nothing the agent holds is a path on the host: the memfd it was started from is gone.
    assert not [t for t in fds.values() if t.startswith("/") and t not in
                ("/dev/null", "/dev/pts/ptmx")], fds


def test_agent_has_its_own_session_without_a_terminal(isolad, sandbox):
    init = ic.sandbox_init_pid(sandbox["id"])
    stat = Path(f"/proc/{init}/stat").read_text().rsplit(")", 1)[1].split()
    sid, tty_nr = int(stat[3]), int(stat[4])
    assert sid == init, f"the agent is in session {sid}, not its own"
    assert tty_nr == 0, f"the agent has a controlling terminal ({tty_nr:#x})"
    isolad_sid = int(Path(f"/proc/{isolad.pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    assert sid != isolad_sid


def test_isolads_terminal_is_unreachable(extra_isolad):
    """isolad started from a terminal (it is the session leader with a pty as controlling
    terminal): neither the agent nor any process in a sandbox has that terminal, and
    /dev/tty inside fails with ENXIO."""
    d = extra_isolad(tty=True)
    ctty = int(Path(f"/proc/{d.pid}/stat").read_text().rsplit(")", 1)[1].split()[4])
    assert ctty != 0, "test setup: isolad did not get the pty as its controlling terminal"
    api = d.client()
    sb = api.create_sandbox()
    init = ic.sandbox_init_pid(sb["id"])
    stat = Path(f"/proc/{init}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(stat[4]) == 0, f"the agent holds isolad's terminal ({int(stat[4]):#x})"
    assert int(stat[3]) == init
    p = run_probe(api, sb["id"], "status")
    s = p["session"]
    assert s["tty_nr"] == 0 and s["dev_tty_errno"] == errno.ENXIO, s
    res = api.exec(sb["id"], cmd=["sh", "-c", "echo pwned > /dev/tty; echo rc=$?"])
    assert "rc=0" not in res["stdout"], res
    # Nothing arrived on isolad's terminal.
    os.set_blocking(d.pty_master, False)
    try:
        got = os.read(d.pty_master, 4096)
    except BlockingIOError:
        got = b""
    assert b"pwned" not in got, got


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


def test_writes_to_template_stay_in_sandbox(api, make_sandbox):
    a, b = make_sandbox(), make_sandbox()
    api.sh(a["id"], "echo owned > /etc/isola-marker && rm -f /etc/hosts")
    res = api.exec(b["id"], cmd=["sh", "-c", "cat /etc/isola-marker; cat /etc/hosts"])
    assert "owned" not in res["stdout"] and "localhost" in res["stdout"], res
    assert not os.path.exists("/etc/isola-marker")
    res = api.exec(a["id"], cmd=["sh", "-c", "touch /usr/bin/isola-x 2>&1; echo rc=$?"])
    assert "rc=0" not in res["stdout"], f"host /usr writable from inside: {res}"
    assert not os.path.exists("/usr/bin/isola-x")
