# SPDX-License-Identifier: Apache-2.0
"""The agent's fd of the writable tmpfs root (docs/process-tier.md "Persistence"): the
sandbox's PID 1 keeps it at fd 3 so isolad can snapshot after a restart. No process of the
sandbox reaches it: not through /proc/1/fd, fdinfo, root or cwd, not with pidfd_getfd, not
as root or as a user, and no other process holds it. (Root inside may list the numbers in
/proc/1/fd: that directory belongs to the namespace's root; resolving an entry needs
CAP_SYS_PTRACE over the non-dumpable agent, which nothing inside holds.) Judged from the host: the fd is there
(the tmpfs root with lower/upper/work/root), nothing was created through it, and no process
but PID 1 holds that inode."""

import os

import pytest

import isola_client as ic

pytestmark = pytest.mark.tiers("process")

AGENT_UPPER_FD = 3
STAGE = {"lower", "upper", "work", "root"}

ATTEMPTS = r"""
for p in /proc/1/fd/3 /proc/1/fd/3/upper /proc/1/fd/3/root /proc/1/fdinfo/3 /proc/1/root \
         /proc/1/cwd /proc/1/map_files; do
    ls "$p" >/dev/null 2>&1 && echo "LISTED $p"
done
readlink /proc/1/fd/3 2>/dev/null && echo READLINK
cat /proc/1/fdinfo/3 2>/dev/null && echo FDINFO
touch /proc/1/fd/3/pwned 2>/dev/null && echo TOUCHED
mkdir /proc/1/fd/3/upper/pwned 2>/dev/null && echo MKDIR
ln -s /proc/1/fd/3 /tmp/via-link 2>/dev/null; ls /tmp/via-link/ 2>/dev/null && echo VIA-LINK
cd /proc/1/fd/3 2>/dev/null && echo CHDIR
echo done
"""

# pidfd_open(1) + pidfd_getfd(pidfd, 3): the call runs only if python3 is in the template.
GETFD = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
pfd = libc.syscall(434, 1, 0)
print("pidfd_open", pfd, ctypes.get_errno())
fd = libc.syscall(438, pfd, 3, 0) if pfd >= 0 else -1
print("pidfd_getfd", fd, ctypes.get_errno())
try:
    os.open("/proc/1/fd/3", os.O_PATH)
    print("OPENED")
except OSError as e:
    print("open", e.errno)
"""


def stage_ident(init):
    p = f"/proc/{init}/fd/{AGENT_UPPER_FD}"
    assert set(os.listdir(p)) == STAGE, os.listdir(p)
    st = os.stat(p)
    return st.st_dev, st.st_ino


def holders(sid, ident):
    """Host pids in the sandbox's cgroup holding an fd on the tmpfs root."""
    out = []
    for pid in ic.sandbox_host_pids(sid):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == ident:
                out.append((pid, int(fd)))
    return out


@pytest.mark.parametrize("user", ["root", "1000"])
def test_sandbox_cannot_reach_the_agents_layer_fd(api, make_sandbox, user):
    sid = make_sandbox()["id"]
    init = ic.sandbox_init_pid(sid)
    ident = stage_ident(init)
    # The fd holds the tmpfs root owned by the sandbox's root (host uid_base).
    uid_base = ic.uid_map(init)[0][1]
    assert os.stat(f"/proc/{init}/fd/{AGENT_UPPER_FD}").st_uid == uid_base
    # A process that lives on while the attempts run: it must not hold the fd either.
    api.start_process(sid, cmd=["sleep", "120"], user=user)
    res = api.exec(sid, cmd=["sh", "-c", ATTEMPTS], user=user)
    assert res["exit_code"] == 0 and res["stdout"] == "done\n", res
    if api.exec(sid, cmd=["sh", "-c", "command -v python3"])["exit_code"] == 0:
        res = api.exec(sid, cmd=["python3", "-c", GETFD], user=user)
        lines = dict(ln.split(" ", 1) for ln in res["stdout"].splitlines())
        assert "OPENED" not in res["stdout"], res
        assert int(lines["pidfd_getfd"].split()[0]) == -1, res
        assert lines["open"].strip() in ("1", "13"), res  # EPERM / EACCES
    else:
        print("python3 not in the template: pidfd_getfd attempt skipped (the seccomp "
              "denial of pidfd_getfd is covered by test_escape.py's sweep)")
    # Judged from the host: nothing created through it, and only PID 1 holds it.
    p = f"/proc/{init}/fd/{AGENT_UPPER_FD}"
    assert set(os.listdir(p)) == STAGE, os.listdir(p)
    assert "pwned" not in os.listdir(f"{p}/upper")
    assert holders(sid, ident) == [(init, AGENT_UPPER_FD)], holders(sid, ident)


def test_layer_fd_is_close_on_exec_and_path_only(make_sandbox):
    """fdinfo from the host: O_PATH (no read or write through it) and O_CLOEXEC."""
    sid = make_sandbox()["id"]
    init = ic.sandbox_init_pid(sid)
    stage_ident(init)
    flags = None
    for line in open(f"/proc/{init}/fdinfo/{AGENT_UPPER_FD}"):
        if line.startswith("flags:"):
            flags = int(line.split()[1], 8)
    assert flags is not None
    assert flags & os.O_PATH, oct(flags)
    assert flags & os.O_CLOEXEC, oct(flags)
    assert flags & os.O_ACCMODE == os.O_RDONLY, oct(flags)
