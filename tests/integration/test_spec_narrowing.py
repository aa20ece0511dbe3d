# SPDX-License-Identifier: Apache-2.0
"""What a spec may narrow and isola honours (docs/oci.md; docs/process-tier.md, "Narrowing a
command"): a read-only root (create's `readonly_root`, a spec's root.readonly, docker run
--read-only) and a command's additional gids, umask, rlimits and oom_score_adj (the process
fields `additional_gids`, `umask`, `rlimits`, `oom_score_adj`, a spec's process.user.
additionalGids/umask, process.rlimits, process.oomScoreAdj). Any principal may set them; what
would widen (a limit raised past isola's, oom_score_adj lowered, a gid outside the sandbox's
range) is refused naming the field (or, for a limit with `rlimits_cap`, as isola-runc asks,
lowered to isola's). Through the Python SDK, the raw API, the CLI and isola-runc."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402  (the SDK users use)
from faults_util import cli as run_cli  # noqa: E402
from tenancy_util import Tenant  # noqa: E402
from test_oci_runtime import make_bundle, rootfs, runc  # noqa: E402,F401  (fixtures)

ROOT_PROBE = ("(touch /newfile) 2>&1 | grep -c 'Read-only file system'; "
              "echo w > /scratch/f && cat /scratch/f; echo s > /dev/shm/f && cat /dev/shm/f; "
              "awk '$5 == \"/\" {print $6}' /proc/self/mountinfo | cut -d, -f1")


def test_readonly_root_survives_restart_hibernation_and_fork(isolad):
    """readonly_root: writes to / fail with EROFS, the tmpfs mounts asked for and /dev/shm stay
    writable; the files API refuses a write to the root (403, read-only) and writes to the
    tmpfs; an isolad restart, a hibernation's wake and a fork's child keep it."""
    c = isolad.client(timeout=120)
    sdk = isola.Client(url=isolad.url, token=isolad.token, timeout=120)
    sb = sdk.create_sandbox(readonly_root=True, tmpfs=[{"destination": "/scratch"}])
    sid = sb.id
    try:
        assert sb.refresh().raw["readonly_root"] is True
        assert c.sh(sid, ROOT_PROBE) == "1\nw\ns\nro\n"
        with pytest.raises(isola.ForbiddenError, match="Read-only file system"):
            sb.files.write("/etc/new", b"x")
        sb.files.write("/scratch/api", b"api")
        assert sb.files.read("/scratch/api") == b"api"
        isolad.restart()
        r = c.request("POST", f"/v1/sandboxes/{sid}/hibernate")
        assert r.status == 200, r
        r = c.request("POST", f"/v1/sandboxes/{sid}/resume")
        assert r.status == 200, r
        assert c.sh(sid, ROOT_PROBE) == "1\nw\ns\nro\n"
        r = c.request("POST", f"/v1/sandboxes/{sid}/fork", json={"count": 1}, timeout=120)
        assert r.status == 201, r
        kid = r.json()["children"][0]["id"]
        try:
            assert c.sh(kid, ROOT_PROBE) == "1\nw\ns\nro\n"
        finally:
            c.delete_sandbox(kid)
    finally:
        c.delete_sandbox(sid)
    # Without the field the root is the writable layer, as before.
    sb = sdk.create_sandbox()
    try:
        assert c.sh(sb.id, "touch /newfile && echo ok") == "ok\n"
        assert sb.refresh().raw["readonly_root"] is False
    finally:
        c.delete_sandbox(sb.id)


def test_cli_read_only(isolad):
    """isola run/create --read-only: the root is read-only, /dev/shm is not."""
    r = run_cli(isolad, "run", "--read-only", "--", "sh", "-c",
                "echo s > /dev/shm/f && cat /dev/shm/f; touch /x")
    assert r.returncode != 0 and r.stdout == "s\n" and "Read-only file system" in r.stderr, r
    r = run_cli(isolad, "--json", "create", "--read-only")
    assert r.returncode == 0, r
    import json
    info = json.loads(r.stdout)
    try:
        assert info["readonly_root"] is True, info
    finally:
        run_cli(isolad, "rm", info["id"])


PROBE = "id -G; umask; ulimit -Sn; ulimit -Hn; ulimit -Hc; cat /proc/self/oom_score_adj"
NARROW = {"additional_gids": [10, 2000], "umask": 0o027,
          "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 64, "hard": 128},
                      {"type": "core", "soft": 0, "hard": 0}],
          "oom_score_adj": 500}


def test_a_tenants_command_narrows_itself(isolad):
    """A tenant's token, through the SDK: exec and a background process get the extra groups,
    the umask, the lowered limits and the raised oom_score_adj; a later command without them
    gets the sandbox's own again."""
    t = Tenant(isolad)
    try:
        sdk = isola.Client(url=isolad.url, token=t.token, timeout=60)
        sb = sdk.create_sandbox()
        res = sb.exec(["sh", "-c", PROBE], narrow=NARROW)
        assert res.stdout.split("\n")[:6] == ["0 10 2000", "0027", "64", "128", "0", "500"], res
        p = sb.processes.start(["sh", "-c", PROBE], narrow=dict(NARROW, umask="077"))
        assert sb.processes.wait(p.pid).exit_code == 0
        out = sb.processes.output(p.pid).stdout.decode().split("\n")
        assert out[:6] == ["0 10 2000", "0077", "64", "128", "0", "500"], out
        # gid: the primary group instead of the user's passwd one (docker run -u 0:3).
        assert sb.exec(["id", "-g"], narrow={"gid": 3}).stdout == "3\n"
        # rlimits_cap: a limit above the sandbox's is lowered to it instead of refused.
        capped = sb.exec(["sh", "-c", "ulimit -Sn; ulimit -Hn"], narrow={
            "rlimits": [{"type": "nofile", "soft": 100, "hard": 4096}], "rlimits_cap": True})
        assert capped.stdout == "100\n1024\n", capped
        # The sandbox's own: root's groups, umask 022, isola's RLIMIT_NOFILE, oom_score_adj 0.
        plain = sb.exec(["sh", "-c", PROBE]).stdout.split("\n")
        assert plain[:4] == ["0", "0022", "1024", "1024"] and plain[5] == "0", plain
    finally:
        t.cleanup()


def test_widening_or_malformed_fields_are_refused_naming_them(isolad):
    c = isolad.client(timeout=60)
    sid = c.create_sandbox()["id"]
    try:
        for body, status, msg in (
                ({"additional_gids": [70000]}, 400,
                 "`additional_gids`: entry 0 must be a gid inside the sandbox's range 0-65535"),
                ({"additional_gids": "10"}, 400, "`additional_gids` must be an array"),
                ({"umask": 0o1000}, 400, "field `umask` must be 0-0777"),
                ({"umask": "rwx"}, 400, "field `umask` must be 0-0777"),
                ({"rlimits": [{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 1}]}, 400,
                 "`rlimits`: entry 0 must be {type, soft, hard}"),
                ({"rlimits": [{"type": "nofile", "soft": 9, "hard": 8}]}, 400,
                 "RLIMIT_NOFILE has soft above hard"),
                ({"rlimits": [{"type": "nofile", "soft": 1, "hard": 1}] * 2}, 400,
                 "RLIMIT_NOFILE is given twice"),
                # Never widened: isola's RLIMIT_NOFILE is 1024 (hard), oom_score_adj 0.
                ({"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 4096}]}, 403,
                 "RLIMIT_NOFILE hard limit 4096 is above the sandbox's 1024"),
                ({"oom_score_adj": -500}, 403,
                 "`oom_score_adj` -500 is below the sandbox's 0 (it may only be raised)"),
                ({"oom_score_adj": 1001}, 400, "`oom_score_adj` must be an integer -1000-1000"),
                ({"rlimits_cap": 1}, 400, "field `rlimits_cap` must be a boolean"),
                ({"gid": 65536}, 400, "field `gid` must be a gid inside the sandbox's range")):
            for path in ("exec", "processes"):
                r = c.request("POST", f"/v1/sandboxes/{sid}/{path}",
                              json=dict(body, cmd=["true"]))
                assert r.status == status and msg in r.json()["message"], (path, body, r)
        r = c.request("POST", "/v1/sandboxes", json={"readonly_root": "yes"})
        assert r.status == 400 and "readonly_root" in r.json()["message"], r
        r = c.request("POST", "/v1/sandboxes", json={"readonly_root": True, "tier": "microvm"})
        assert r.json()["code"] == "not_supported" and \
            "readonly_root: needs the process tier" in r.json()["message"], r
        r = c.request("POST", "/v1/sandboxes", json={"readonly_root": True, "snapshot": "s1"})
        assert r.status == 400 and "`readonly_root` cannot be combined with `snapshot`" in \
            r.json()["message"], r
    finally:
        c.delete_sandbox(sid)


def test_runc_maps_the_spec_fields(runc, rootfs, tmp_path):
    """isola-runc: root.readonly, process.user.additionalGids and umask, process.rlimits and
    process.oomScoreAdj reach the container's process; `exec --process` maps them too."""
    script = ("id -G; umask; ulimit -Sn; ulimit -Hn; cat /proc/self/oom_score_adj; "
              "(echo x > /newfile) 2>/dev/null || echo root-ro; echo t > /tmp/t && cat /tmp/t")

    def edit(c):
        c["root"]["readonly"] = True
        # uid 0's passwd gid is 0: the spec's gid 7 is the primary group instead.
        c["process"]["user"].update(gid=7, additionalGids=[5, 6], umask=0o077)
        c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 100, "hard": 200}]
        c["process"]["oomScoreAdj"] = 300
        c["mounts"] = c.get("mounts", []) + [
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []}]
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", script], edit)
    cp = runc("run", "--bundle", b, "nw1")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "7 5 6\n0077\n100\n200\n300\nroot-ro\nt\n", cp.stdout


def test_runc_caps_a_limit_above_isolas(runc, rootfs, tmp_path):
    """An engine's default above isola's (Podman: RLIMIT_NOFILE 1048576, its own process's) is
    lowered to isola's 1024 (`rlimits_cap`), not refused: the container runs."""
    def edit(c):
        c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 1 << 20, "hard": 1 << 20},
                                   {"type": "RLIMIT_CORE", "soft": 0, "hard": 0}]
    b = make_bundle(runc, rootfs, tmp_path, ["sh", "-c", "ulimit -Sn; ulimit -Hn; ulimit -c"],
                    edit)
    cp = runc("run", "--bundle", b, "nw3")
    assert cp.returncode == 0 and cp.stdout == "1024\n1024\n0\n", (cp.stdout, cp.stderr)


def test_runc_keeps_the_sandbox_score_for_a_negative_oom_score_adj(runc, rootfs, tmp_path):
    """Kubernetes gives a pod's pause container oomScoreAdj -998 (a Guaranteed pod -997):
    lowering would widen, so the container runs with the sandbox's own score instead of
    being refused (the native API refuses it: test_widening_or_malformed_fields_are_refused_naming_them)."""
    def edit(c):
        c["process"]["oomScoreAdj"] = -998
    b = make_bundle(runc, rootfs, tmp_path, ["cat", "/proc/self/oom_score_adj"], edit)
    cp = runc("run", "--bundle", b, "nw4")
    assert cp.returncode == 0 and cp.stdout == "0\n", (cp.stdout, cp.stderr)


@pytest.mark.parametrize("edit,msg", [
    (lambda c: c["process"]["user"].update(additionalGids=[1 << 20]),
     "`additional_gids`: entry 0 must be a gid inside the sandbox's range"),
    (lambda c: c["process"].update(oomScoreAdj="high"),
     "`process.oomScoreAdj` must be an integer"),
])
def test_runc_refuses_what_would_widen(runc, rootfs, tmp_path, edit, msg):
    b = make_bundle(runc, rootfs, tmp_path, ["true"], edit)
    cp = runc("run", "--bundle", b, "nw2")
    assert cp.returncode != 0 and msg in cp.stderr, cp.stderr
