# SPDX-License-Identifier: Apache-2.0
"""Hostile templates (runc CVE-2023-27561, CVE-2025-31133/-52565/-52881 class): images whose
/dev, /proc or /sys is a symlink (absolute, relative, to /) or not a directory are refused
with a clear 400; images whose /dev/null, /dev/console, /dev/pts or /dev/shm is a symlink or
a file are handled safely (the sandbox's /dev is a fresh tmpfs). Both with openat2 and with
the O_NOFOLLOW walk it falls back to (a second isolad with ISOLA_TEST_NO_OPENAT2=1), judged
on the host by an inotify-watched canary that the symlinks point at."""

import uuid

import pytest

import isola_client as ic
import seclib

# name -> (entries to add to the base image (canary dir/secret substituted), expected)
CASES = {
    "dev-symlink-abs": ([{"name": "dev", "type": "symlink", "target": "{dir}"}], "dev"),
    "proc-symlink-abs": ([{"name": "proc", "type": "symlink", "target": "{dir}"}], "proc"),
    "sys-symlink-abs": ([{"name": "sys", "type": "symlink", "target": "{dir}"}], "sys"),
    "dev-symlink-rel": ([{"name": "dev", "type": "symlink",
                          "target": "../../../../../../../..{dir}"}], "dev"),
    "proc-symlink-root": ([{"name": "proc", "type": "symlink", "target": "/"}], "proc"),
    "sys-symlink-dotdot": ([{"name": "sys", "type": "symlink", "target": ".."}], "sys"),
    "dev-is-a-file": ([{"name": "dev", "data": b"not a directory"}], "dev"),
    "sys-is-a-fifo": ([{"name": "sys", "type": "fifo"}], "sys"),
    "dev-null-symlink": ([{"name": "dev", "type": "dir"},
                          {"name": "dev/null", "type": "symlink", "target": "{secret}"}], None),
    "dev-console-symlink": ([{"name": "dev", "type": "dir"},
                             {"name": "dev/console", "type": "symlink", "target": "{secret}"}],
                            None),
    "dev-null-file": ([{"name": "dev", "type": "dir"},
                       {"name": "dev/null", "data": b"not a device"}], None),
    "dev-pts-shm-symlinks": ([{"name": "dev", "type": "dir"},
                              {"name": "dev/pts", "type": "symlink", "target": "{dir}"},
                              {"name": "dev/shm", "type": "symlink", "target": "{dir}"}], None),
    "proc-self-junk": ([{"name": "proc", "type": "dir"},
                        {"name": "proc/self", "type": "symlink", "target": "{dir}"},
                        {"name": "proc/1", "type": "symlink", "target": "{dir}"}], None),
}

DEV = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "mqueue", "fd",
       "stdin", "stdout", "stderr"}


@pytest.fixture(scope="module")
def module_canary():
    c = seclib.Canary()
    yield c
    c.close()


@pytest.fixture(scope="module")
def isolad_walk():
    """A second isolad whose sandboxes resolve mount targets with the O_NOFOLLOW walk."""
    d = seclib.ExtraIsolad(extra_env={"ISOLA_TEST_NO_OPENAT2": "1"})
    yield d
    problems = d.shutdown()
    assert not problems, problems


@pytest.fixture(scope="module")
def images(module_canary):
    out = {}
    for case, (extra, _) in CASES.items():
        entries = []
        for e in extra:
            e = dict(e)
            if "target" in e:
                e["target"] = e["target"].format(dir=module_canary.dir,
                                                 secret=module_canary.secret)
            entries.append(e)
        base = [e for e in seclib.base_entries()
                if e["name"].split("/")[0] not in {x["name"].split("/")[0] for x in entries}]
        out[case] = seclib.docker_archive(base + entries)
    return out


@pytest.fixture(params=["openat2", "walk"])
def daemon(request, isolad, isolad_walk):
    return request.param, (isolad if request.param == "openat2" else isolad_walk)


@pytest.mark.host_exclusive  # every isola cgroup on the host
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_template(daemon, images, module_canary, case):
    mode, d = daemon
    api = d.client()
    name = f"hostile-{case}-{uuid.uuid4().hex[:6]}"
    seclib.import_template(api, name, images[case])
    cgroups_before = ic.cgroup_dirs()
    module_canary.untouched(f"{case}: import")
    refused_at = CASES[case][1]
    sid = None
    try:
        r = api.request("POST", "/v1/sandboxes", json={"template": name}, timeout=60)
        if refused_at:
            assert r.status == 400, f"{case} ({mode}): expected a refusal, got {r}"
            msg = r.error_message
            assert r.error_code == "invalid", r
            assert f"`{refused_at}`" in msg and "template" in msg, msg
            assert "symlink or not a directory" in msg, msg
            # Each resolution path ran: openat2 answers ELOOP for a symlink, the
            # O_NOFOLLOW walk opens the link itself and finds it is not a directory.
            if CASES[case][0][0].get("type") == "symlink":
                want = "symbolic links" if mode == "openat2" else "Not a directory"
                assert want in msg, f"{mode}: {msg}"
            assert not [s for s in api.list_sandboxes() if s.get("template") == name], \
                "a refused create left a sandbox behind"
            assert ic.cgroup_dirs() == cgroups_before, "a refused create left a cgroup"
        else:
            assert r.status == 201, f"{case} ({mode}): {r}"
            sid = r.json()["id"]
            check_dev_is_ours(api, sid, module_canary)
        assert not ic.mounts_referencing(module_canary.dir), "the canary is a mount point"
        module_canary.untouched(f"{case} ({mode})")
    finally:
        if sid:
            assert api.delete_sandbox(sid).status == 204
        api.request("DELETE", f"/v1/templates/{name}")


def check_dev_is_ours(api, sid, canary):
    """Inside: /dev is the fresh one whatever the image had; reads and writes through the
    image's symlink names stay inside; /proc and the probe work."""
    files = f"/v1/sandboxes/{sid}/files"
    lst = api.get_json(f"/v1/sandboxes/{sid}/fs/list", query={"path": "/dev"})
    names = {e["name"] for e in ic.item_list(lst, "entries")}
    assert names == DEV, f"/dev holds {sorted(names)}"
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/dev/null"})
    assert st["type"] == "other", f"/dev/null is not the device: {st}"
    # There is no /dev/console; writing one creates a plain file in the sandbox's /dev
    # (a tmpfs), never anything the image's symlink named.
    r = api.request("GET", files, query={"path": "/dev/console"})
    assert r.status == 404, r
    for p in ("/dev/console", "/dev/null"):
        r = api.request("PUT", files, body=b"pwned", query={"path": p})
        # /dev/null is a mount point: replacing it fails (409 busy); /dev/console is made
        assert r.status in (200, 201, 204, 400, 403, 409), (p, r)
    st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": "/dev/null"})
    assert st["type"] == "other", f"/dev/null replaced: {st}"
    for p in ("/dev/pts", "/dev/shm"):
        st = api.get_json(f"/v1/sandboxes/{sid}/fs/stat", query={"path": p})
        assert st["type"] == "dir", (p, st)
    res = api.exec(sid, cmd=["/probe", "status"])
    assert res["exit_code"] == 0 and '"NoNewPrivs: 1"' in res["stdout"], res
    assert canary.token not in res["stdout"]


DEFAULT_CAPS = sum(1 << n for n in (0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29, 31))  # 0xa00405fb

def test_setuid_binary_in_a_template_gains_nothing(isolad):
    """An image ships a setuid-root, setgid-root binary (kept by the importer, as Docker
    does): run as `user` it keeps uid/gid 1000 and no capability."""
    api = isolad.client()
    name = f"suid-{uuid.uuid4().hex[:6]}"
    entries = seclib.base_entries() + [{"name": "suid-probe", "data": seclib.PROBE.read_bytes(),
                                        "mode": 0o6755, "uid": 0, "gid": 0}]
    seclib.import_template(api, name, seclib.docker_archive(entries))
    try:
        sb = api.create_sandbox(template=name)
        try:
            st = api.get_json(f"/v1/sandboxes/{sb['id']}/fs/stat", query={"path": "/suid-probe"})
            mode = st["mode"] if isinstance(st["mode"], int) else int(st["mode"], 8)
            assert mode & 0o6000 == 0o6000 and st["uid"] == 0, f"test setup: {st}"
            p = seclib.run_probe(api, sb["id"], "status", user="user", path="/suid-probe")
            s = p["status"]
            assert s["Uid"] == ["1000"] * 4 and s["Gid"] == ["1000"] * 4, s
            for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                assert int(s[cap][0], 16) == 0, f"{cap} = {s[cap]}"
            # The bounding set is the sandbox's default set (docs/process-tier.md,
            # "Capabilities"), never more: CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID
            # SETPCAP NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP.
            assert int(s["CapBnd"][0], 16) == DEFAULT_CAPS, f"CapBnd = {s['CapBnd']}"
        finally:
            api.delete_sandbox(sb["id"])
    finally:
        api.request("DELETE", f"/v1/templates/{name}")
