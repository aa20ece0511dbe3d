# SPDX-License-Identifier: Apache-2.0
"""The files API cannot reach outside the sandbox: every path the agent is given — ../,
absolute host paths, /proc magic links, NUL, overlong, and symlinks or dangling symlinks
created inside then used through the API — is resolved by the agent inside the sandbox, so
it only ever reaches the sandbox's own files. Proven with host canaries (a /tmp directory
and one in the sandbox's own host state directory) watched with inotify: never opened,
read, written, created in or renamed, across every file operation and tar up/download.

Hostile archives here extend tests/integration/test_files.py::test_hostile_archive_is_refused
(../, absolute, symlink-then-file, hardlinks outside) and ::test_hostile_archive_device_node
with host-canary targets, setuid bits, block devices, fifos and writes through symlinks
planted inside."""

import os

import pytest

import isola_client as ic
import seclib


def hostile_paths(targets):
    out = []
    for t in targets:
        out += [t, "../../../../../../../../.." + t, "/proc/1/root" + t, "/proc/self/root" + t,
                "/proc/1/root/../../../.." + t, "/proc/1/cwd/../../../.." + t,
                "/tmp/l_abs", "/tmp/l_dir/" + os.path.basename(t), "/tmp/l_proc" + t,
                "/tmp/l_up" + t, "/tmp/dang", "/tmp/chain1", "/tmp/l_dir"]
    out += [f"/proc/1/fd/{i}" for i in range(8)] + [f"/proc/self/fd/{i}" for i in range(8)] + \
        ["/proc/1/root", "/proc/1/cwd", "/proc/1/exe", "/proc/self/exe", "/proc/1/mem"]
    return list(dict.fromkeys(out))


def plant_symlinks(api, sid, target):
    d = os.path.dirname(target)
    api.sh(sid, f"cd /tmp && ln -sfn {target} l_abs && ln -sfn {d} l_dir && "
                f"ln -sfn /proc/1/root l_proc && ln -sfn ../../../../../.. l_up && "
                f"ln -sfn {target}.new dang && ln -sfn /tmp/chain2 chain1 && "
                f"ln -sfn {target} chain2")


def every_operation(api, sid, p):
    """Each file operation on p; returns [(op, status, body)]."""
    base = f"/v1/sandboxes/{sid}"
    res = []

    def rec(op, r):
        res.append((op, r.status, r.body))

    rec("read", api.request("GET", f"{base}/files", query={"path": p}))
    rec("range", api.request("GET", f"{base}/files", query={"path": p},
                             headers={"Range": "bytes=0-10"}))
    rec("stat", api.request("GET", f"{base}/fs/stat", query={"path": p}))
    rec("list", api.request("GET", f"{base}/fs/list", query={"path": p, "depth": "2"}))
    rec("tar_get", api.request("GET", f"{base}/archive", query={"path": p}))
    rec("write", api.request("PUT", f"{base}/files", body=b"PWNED", query={"path": p}))
    rec("append", api.request("PUT", f"{base}/files", body=b"PWNED",
                              query={"path": p, "append": "true"}))
    rec("mkdir", api.request("POST", f"{base}/fs/mkdir", json={"path": p + "/sub",
                                                               "parents": True}))
    api.sh(sid, "echo x > /tmp/src")
    rec("rename_to", api.request("POST", f"{base}/fs/rename",
                                 json={"from": "/tmp/src", "to": p, "overwrite": True}))
    rec("rename_from", api.request("POST", f"{base}/fs/rename",
                                   json={"from": p, "to": "/tmp/moved", "overwrite": True}))
    rec("tar_put", api.request("PUT", f"{base}/archive", query={"path": p},
                               body=seclib.tar_entries([{"name": "pwn", "data": b"PWNED"}]),
                               headers={"Content-Type": "application/x-tar"}))
    rec("remove", api.request("POST", f"{base}/fs/remove", json={"path": p, "recursive": True}))
    return res


@pytest.fixture
def state_canary(isolad, sandbox):
    """A canary inside the sandbox's own host state directory, next to its agent.sock."""
    c = seclib.Canary(base=os.path.join(isolad.state_dir, "sandboxes", sandbox["id"]))
    yield c
    c.close()


def test_traversal_never_reaches_the_host(api, sandbox, canary, state_canary):
    sid = sandbox["id"]
    tokens = (canary.token.encode(), state_canary.token.encode())
    failures = []
    for target in (canary.secret, state_canary.secret):
        plant_symlinks(api, sid, target)
        canary.untouched("planting symlinks")
        for p in hostile_paths([target]):
            for op, status, body in every_operation(api, sid, p):
                if status >= 500:
                    failures.append(f"{op} {p}: {status} {body[:200]!r}")
                if any(t in body for t in tokens):
                    failures.append(f"{op} {p}: the canary's secret came back")
            plant_symlinks(api, sid, target)  # rename/remove may have moved them
    assert not failures, "\n".join(failures[:20])
    canary.untouched("files API")
    state_canary.untouched("files API")
    # Whatever was written went to the sandbox's own files.
    assert api.exec(sid, cmd=["echo", "alive"])["stdout"] == "alive\n"


def test_agent_magic_links_refused(api, sandbox):
    """/proc/self and /proc/1 are the agent itself: its fds (isolad's connection, other
    processes' pipes), memory, root. No exec'd process may open them (the agent is not
    dumpable); through the files API the agent must refuse them too, for every user."""
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}"
    pid = api.start_process(sid, cmd=["sh", "-c", "cat > /tmp/stdin-got"])["pid"]
    init = ic.sandbox_init_pid(sid)
    fds = sorted(int(f) for f in os.listdir(f"/proc/{init}/fd"))
    for who in ("/proc/1", "/proc/self"):
        for name in [f"fd/{n}" for n in fds] + ["mem", "environ", "exe", "maps", "comm",
                                                  "oom_score_adj", "task/1/mem", "cwd/etc/hosts",
                                                  "root/etc/hosts"]:
            p = f"{who}/{name}"
            r = api.request("GET", f"{base}/files", query={"path": p},
                            headers={"Range": "bytes=4096-8191"})
            assert r.status == 403, (p, r)
            r = api.request("PUT", f"{base}/files", body=b"PWNED",
                            query={"path": p, "append": "true"})
            assert r.status in (403, 404), (p, r)
    # The same through a symlink planted inside, and as an unprivileged user.
    api.sh(sid, "ln -sfn /proc/1 /tmp/agent && ln -sfn /proc/self/fd /tmp/fds")
    for p in ("/tmp/agent/oom_score_adj", "/tmp/agent/mem", "/tmp/fds/0", "/tmp/fds/3"):
        r = api.request("PUT", f"{base}/files", body=b"1000",
                        query={"path": p, "append": "true"})
        assert r.status in (403, 404), (p, r)
    assert api.sh(sid, "cat /proc/1/oom_score_adj").strip() == "0"
    # Nothing reached the process whose stdin pipe the agent holds.
    api.request("POST", f"{base}/processes/{pid}/close-stdin")
    api.wait_process(sid, pid, timeout=10)
    assert api.read_file(sid, "/tmp/stdin-got") == b""


def test_nul_and_overlong_paths(api, sandbox, canary):
    sid = sandbox["id"]
    base = f"/v1/sandboxes/{sid}"
    for p in (canary.secret + "\0", "/tmp/x\0" + canary.secret, "\0",
              "/" + "a" * 4097, "/" + "/".join(["a"] * 2100), canary.dir + "/" + "b" * 300):
        for method, path, kw in (
                ("GET", f"{base}/files", {"query": {"path": p}}),
                ("PUT", f"{base}/files", {"query": {"path": p}, "body": b"PWNED"}),
                ("GET", f"{base}/fs/stat", {"query": {"path": p}}),
                ("POST", f"{base}/fs/mkdir", {"json": {"path": p}}),
                ("POST", f"{base}/fs/remove", {"json": {"path": p}}),
                ("GET", f"{base}/archive", {"query": {"path": p}})):
            r = api.request(method, path, **kw)
            assert 400 <= r.status < 500, (method, path, repr(p[:40]), r)
    canary.untouched("NUL and overlong paths")


def tput(api, sid, dest, entries):
    return api.request("PUT", f"/v1/sandboxes/{sid}/archive", query={"path": dest},
                       body=seclib.tar_entries(entries),
                       headers={"Content-Type": "application/x-tar"})


HOSTILE_TARS = {
    "abs-canary": lambda c: [{"name": c.dir + "/pwn", "data": b"PWNED"}],
    "dotdot-canary": lambda c: [{"name": "../../../../../.." + c.dir + "/pwn", "data": b"PWNED"}],
    "dot-dotdot": lambda c: [{"name": "a/./../../pwn", "data": b"PWNED"}],
    "symlink-canary-then-file": lambda c: [{"name": "esc", "type": "symlink", "target": c.dir},
                                           {"name": "esc/pwn", "data": b"PWNED"}],
    "symlink-then-dir-then-file": lambda c: [
        {"name": "d", "type": "symlink", "target": c.dir}, {"name": "d", "type": "dir"},
        {"name": "d/pwn", "data": b"PWNED"}],
    "hardlink-to-canary": lambda c: [{"name": "h", "type": "hardlink", "target": c.secret}],
    "hardlink-through-symlink": lambda c: [
        {"name": "s", "type": "symlink", "target": os.path.dirname(c.secret)},
        {"name": "h", "type": "hardlink", "target": "s/" + os.path.basename(c.secret)}],
    "block-device": lambda c: [{"name": "sda", "type": "blk", "dev": (8, 0)}],
    "fifo": lambda c: [{"name": "fifo", "type": "fifo"}],
    "overlong-name": lambda c: [{"name": "x" * 5000, "data": b"PWNED"}],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_TARS))
def test_hostile_archive_against_host_canary(api, sandbox, canary, kind):
    sid = sandbox["id"]
    api.sh(sid, "mkdir -p /tmp/target/deep")
    r = tput(api, sid, "/tmp/target/deep", HOSTILE_TARS[kind](canary))
    assert r.status == 400, f"{kind}: {r}"
    assert r.error_code == "invalid", r
    res = api.exec(sid, cmd=["sh", "-c", "find /tmp/target -mindepth 2 | sort; "
                                         "grep -rl PWNED / --exclude-dir=proc --exclude-dir=sys "
                                         "--exclude-dir=usr 2>/dev/null; true"])
    leaked = [ln for ln in res["stdout"].split() if not ln.startswith("/tmp/target/deep/")]
    assert not [ln for ln in leaked if ln != "/tmp/target/deep"], f"{kind}: {leaked}"
    canary.untouched(kind)


def test_archive_setuid_bits_stripped_and_symlinks_inside_not_followed(api, sandbox, canary):
    sid = sandbox["id"]
    api.sh(sid, "mkdir -p /tmp/t && cp /etc/passwd /tmp/passwd.orig && "
                "ln -s /etc/passwd /tmp/t/victim && ln -s " + canary.secret + " /tmp/t/host")
    r = tput(api, sid, "/tmp/t", [
        {"name": "suid", "data": b"#!/bin/sh\nid\n", "mode": 0o6755, "uid": 0, "gid": 0},
        {"name": "sdir", "type": "dir", "mode": 0o3777},
        {"name": "victim", "data": b"PWNED"},
        {"name": "host", "data": b"PWNED"},
    ])
    assert r.status in (200, 201, 204, 400), r
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/tmp/t/suid"}) \
        if r.status != 400 else None
    if st:
        mode = st["mode"] if isinstance(st["mode"], int) else int(st["mode"], 8)
        assert mode & 0o6000 == 0, f"setuid/setgid kept: {oct(mode)}"
    # Through a symlink planted inside: /etc/passwd (inside) and the canary untouched.
    assert api.sh(sid, "cmp /etc/passwd /tmp/passwd.orig && echo same") == "same\n"
    canary.untouched("tar over planted symlinks")
