# SPDX-License-Identifier: Apache-2.0
"""The create field `seccomp` (docs/oci.md, "The spec's seccomp profile"; isola-runc maps a
spec's linux.seccomp to it): an OCI profile every process started in the sandbox runs under,
stacked on isola's own filter, while the agent (the files API) is not under it. Any principal
may set it (it only narrows); isolad refuses a bad one naming what is wrong; an isolad
restart, a hibernation and a fork keep it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402  (the SDK users use)
from tenancy_util import Tenant  # noqa: E402

# mkdir refused with EPERM, symlink with the profile's own errno (EDQUOT, 122): the errno a
# process sees is the profile's, not isola's.
DENY_MKDIR = {
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "syscalls": [
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
        {"names": ["symlink", "symlinkat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 122},
        # A name this libseccomp does not know is skipped, as runc does.
        {"names": ["no_such_syscall_isola"], "action": "SCMP_ACT_ERRNO"},
    ],
}

PROBE = ("export LC_ALL=C; grep Seccomp_filters /proc/self/status; "
         "mkdir /tmp/d 2>&1; ln -s x /tmp/l 2>&1; echo done")
DENIED = ("Seccomp_filters:\t2\n"
          "mkdir: cannot create directory '/tmp/d': Operation not permitted\n"
          "ln: failed to create symbolic link '/tmp/l': Disk quota exceeded\n"
          "done\n")


def probe(c, sid):
    res = c.exec(sid, cmd=["sh", "-c", PROBE])
    return res["stdout"]


def test_profile_applies_to_exec_and_started_processes_not_the_agent(isolad):
    c = isolad.client(timeout=120)
    sdk = isola.Client(url=isolad.url, token=isolad.token, timeout=120)
    sb = c.create_sandbox(seccomp=DENY_MKDIR)
    sid = sb["id"]
    try:
        assert probe(c, sid) == DENIED
        # A started (background) process is under it too, as runc's container process.
        p = c.start_process(sid, cmd=["sh", "-c", PROBE])
        c.wait_process(sid, p["pid"])
        out = c.get_json(f"/v1/sandboxes/{sid}/processes/{p['pid']}/output")
        assert out["stdout"] == DENIED, out
        # The agent is not: the files API makes a directory (mkdirat in the agent).
        h = sdk.sandbox(sid)
        h.files.mkdir("/tmp/by-agent")
        c.write_file(sid, "/tmp/by-agent/f", b"x")
        assert c.read_file(sid, "/tmp/by-agent/f") == b"x"
        # A restart re-attaches to the running agent, which keeps the program; the stored
        # profile is compiled again for the wake from hibernation and for a fork's child.
        isolad.restart()
        assert probe(c, sid) == DENIED
        assert c.request("POST", f"/v1/sandboxes/{sid}/hibernate").status == 200
        assert c.request("POST", f"/v1/sandboxes/{sid}/resume").status == 200
        assert probe(c, sid) == DENIED
        r = c.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 1}, timeout=120)
        assert r.status == 201, r
        kid = r.json()["children"][0]["id"]
        try:
            assert probe(c, kid) == DENIED
        finally:
            c.delete_sandbox(kid)
    finally:
        c.delete_sandbox(sid)


def test_without_a_profile_only_isolas_filter(isolad):
    c = isolad.client(timeout=60)
    sid = c.create_sandbox()["id"]
    try:
        out = c.sh(sid, "grep Seccomp_filters /proc/self/status; mkdir /tmp/d && echo made")
        assert out == "Seccomp_filters:\t1\nmade\n", out
    finally:
        c.delete_sandbox(sid)


# What a dynamically linked coreutils binary and sh need to start, write and exit.
BASE = ["execve", "brk", "mmap", "munmap", "mprotect", "arch_prctl", "set_tid_address",
        "set_robust_list", "rseq", "prlimit64", "read", "write", "openat", "open", "close",
        "fstat", "newfstatat", "stat", "lstat", "access", "faccessat", "faccessat2", "pread64",
        "getrandom", "exit_group", "exit", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
        "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "fcntl", "dup2", "dup3",
        "ioctl", "lseek", "futex", "statfs", "readlink", "getcwd", "wait4", "clone", "vfork",
        "fork", "uname", "sysinfo", "getdents64", "fadvise64", "madvise"]


def test_default_errno_with_an_allow_list_and_an_argument_test(isolad):
    """defaultAction ERRNO (defaultErrnoRet ENOSYS) with an allow list: what is not listed
    fails with the profile's errno; personality is allowed only for the query value
    0xffffffff (an argument test), so setting a persona fails with EPERM (the rule's)."""
    prof = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 38,
        "syscalls": [
            {"names": BASE, "action": "SCMP_ACT_ALLOW"},
            {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
             "args": [{"index": 0, "value": 0xffffffff, "op": "SCMP_CMP_EQ"}]},
            {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "args": [{"index": 0, "value": 0xffffffff, "op": "SCMP_CMP_NE"}]},
        ],
    }
    c = isolad.client(timeout=60)
    sid = c.create_sandbox(seccomp=prof)["id"]
    try:
        # echo runs (all it needs is listed); chmod's fchmodat is not: ENOSYS.
        out = c.exec(sid, cmd=["sh", "-c", "export LC_ALL=C; echo hi; chmod 600 /tmp 2>&1; true"])
        assert out["stdout"].startswith("hi\nchmod: changing permissions of '/tmp': "
                                        "Function not implemented"), out
        # setarch queries (0xffffffff, allowed) then sets PER_LINUX32 (8): refused, EPERM.
        out = c.exec(sid, cmd=["sh", "-c", "export LC_ALL=C; setarch linux32 true 2>&1; echo rc=$?"])
        assert "Operation not permitted" in out["stdout"] and "rc=1" in out["stdout"], out
    finally:
        c.delete_sandbox(sid)


def test_any_principal_may_narrow(isolad):
    """A tenant's user (not the operator) sets it through the Python SDK."""
    t = Tenant(isolad)
    try:
        sdk = isola.Client(url=isolad.url, token=t.token, timeout=60)
        sb = sdk.create_sandbox(seccomp=DENY_MKDIR)
        res = sb.exec(["sh", "-c", PROBE])
        assert res.stdout == DENIED, res
    finally:
        t.cleanup()


def test_bad_profiles_are_refused_naming_them(isolad):
    c = isolad.client(timeout=60)
    allow = {"defaultAction": "SCMP_ACT_ALLOW"}
    too_many = dict(allow, syscalls=[{"names": ["mkdir"] * 5000, "action": "SCMP_ACT_KILL"}])
    # Each entry a separate argument test: past the kernel's 4096 BPF instructions.
    too_big = dict(allow, syscalls=[
        {"names": ["personality", "ioctl"], "action": "SCMP_ACT_ERRNO",
         "args": [{"index": 0, "value": v, "op": "SCMP_CMP_EQ"},
                  {"index": 1, "value": v, "op": "SCMP_CMP_EQ"}]} for v in range(1, 1001)])
    for body, msg in (
            ({"seccomp": "default"}, "field `seccomp` must be an object"),
            ({"seccomp": {"defaultAction": "SCMP_ACT_BOGUS"}},
             "seccomp: profile: unknown action `SCMP_ACT_BOGUS`"),
            ({"seccomp": {"defaultAction": "SCMP_ACT_NOTIFY"}},
             "action SCMP_ACT_NOTIFY is not supported"),
            ({"seccomp": dict(allow, syscalls=[{"names": ["mkdir"],
                                                "action": "SCMP_ACT_NOTIFY"}])},
             "seccomp: syscalls[0]: action SCMP_ACT_NOTIFY is not supported"),
            ({"seccomp": dict(allow, listenerPath="/run/agent.sock")},
             "`listenerPath` is not supported"),
            ({"seccomp": dict(allow, architectures=["SCMP_ARCH_VAX"])},
             "architectures[0]: unknown architecture `SCMP_ARCH_VAX`"),
            ({"seccomp": dict(allow, flags=["SECCOMP_FILTER_FLAG_NEW_LISTENER"])},
             "flag `SECCOMP_FILTER_FLAG_NEW_LISTENER` is not supported"),
            ({"seccomp": dict(allow, syscalls=[{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO",
                                                "args": [{"index": 0, "value": 1,
                                                          "op": "SCMP_CMP_ALMOST"}]}])},
             "syscalls[0]: args[0]: unknown operator `SCMP_CMP_ALMOST`"),
            ({"seccomp": dict(allow, syscalls=[{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO",
                                                "args": [{"index": 6, "value": 1,
                                                          "op": "SCMP_CMP_EQ"}]}])},
             "syscalls[0]: `index` must be an integer from 0 to 5"),
            ({"seccomp": dict(allow, syscalls=[{"names": ["mkdir"], "action": "SCMP_ACT_KILL",
                                                "errnoRet": 1}])},
             "`errnoRet` is only allowed with SCMP_ACT_ERRNO or SCMP_ACT_TRACE"),
            ({"seccomp": dict(allow, syscalls=[{"names": [], "action": "SCMP_ACT_KILL"}])},
             "syscalls[0]: `names` must be a non-empty array"),
            ({"seccomp": dict(allow, syscalls=[{"names": ["mkdir"], "action": "SCMP_ACT_KILL",
                                                "includes": {}}])},
             "syscalls[0]: unknown field `includes`"),
            ({"seccomp": too_many}, "more than 4096 syscall names in all"),
            ({"seccomp": too_big}, "BPF instructions, more than the kernel's 4096"),
            ({"seccomp": allow, "tier": "microvm"},
             "the spec's seccomp profile needs the process tier"),
            ({"seccomp": allow, "snapshot": "s1"},
             "field `seccomp` cannot be combined with `snapshot`")):
        r = c.request("POST", "/v1/sandboxes", json=body)
        assert r.status in (400, 501) and msg in r.json()["message"], (body, r.json())


def test_actions_and_a_masked_argument_test(isolad):
    """SCMP_ACT_KILL_PROCESS kills with SIGSYS; SCMP_ACT_TRACE without a tracer fails the call
    with ENOSYS, as the kernel does; SCMP_CMP_MASKED_EQ tests (arg & value) == valueTwo; a
    process of another user than root is under the profile too."""
    prof = {
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [
            {"names": ["sync"], "action": "SCMP_ACT_KILL_PROCESS"},
            {"names": ["chmod", "fchmodat", "fchmodat2"], "action": "SCMP_ACT_TRACE"},
            {"names": ["personality"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
             "args": [{"index": 0, "value": 0xff, "valueTwo": 8,
                       "op": "SCMP_CMP_MASKED_EQ"}]},
        ],
    }
    c = isolad.client(timeout=60)
    sid = c.create_sandbox(seccomp=prof)["id"]
    try:
        out = c.exec(sid, cmd=["sh", "-c", "export LC_ALL=C; sync; echo rc=$?; "
                               "chmod 700 /tmp 2>&1; setarch linux32 true 2>&1; echo rc=$?; "
                               "setarch x86_64 true; echo rc=$?"])
        assert out["stdout"] == ("rc=159\n"
                                 "chmod: changing permissions of '/tmp': Function not "
                                 "implemented\n"
                                 "setarch: failed to set personality to linux32: Operation "
                                 "not permitted\nrc=1\nrc=0\n"), out
        res = c.exec(sid, cmd=["sh", "-c", "export LC_ALL=C; id -u; mkdir /tmp/u; echo rc=$?; "
                               "sync; echo rc=$?"], user="user")
        assert res["stdout"] == "1000\nrc=0\nrc=159\n", res
    finally:
        c.delete_sandbox(sid)
