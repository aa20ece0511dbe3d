# SPDX-License-Identifier: Apache-2.0
"""Issue 18's behaviour (never its timings): a destroy answers before its network's host side
is removed (net.c's reaper), and that teardown is never lost to a stop or a crash; `isola bench`
reports the exec and file round trips beside the host's own fork+exec."""

import concurrent.futures
import json
import os
import shutil
import subprocess
import tempfile

import pytest

import isola_client as ic
from faults_util import Isolad, CLI, lock_is_free, sdk, veths


@pytest.fixture(scope="module")
def pd():
    d = Isolad(state_dir=tempfile.mkdtemp(prefix="isola-pf-", dir="/tmp"))
    try:
        yield d
    finally:
        if d.alive():
            d.destroy_all_sandboxes()
            d.stop()
        assert lock_is_free(d), "the state-dir lock is still held after isolad stopped"
        if not os.environ.get("ISOLA_KEEP_STATE"):
            shutil.rmtree(d.state_dir, ignore_errors=True)


def network_left(d, sid):
    """What the sandbox's network still holds on the host: its veth and its record."""
    left = veths(sid)
    if os.path.exists(os.path.join(d.state_dir, "network", f"{sid}.json")):
        left.append(f"network/{sid}.json")
    return left


def make_some(d, n):
    c = sdk(d)
    ids = [c.create_sandbox().id for _ in range(n)]
    for sid in ids:
        assert veths(sid), f"sandbox {sid} has no veth on the host"
    return c, ids


@pytest.mark.parametrize("kill9", [False, True], ids=["stop", "kill9"])
def test_teardown_in_flight_is_finished_by_stop_or_next_start(pd, kill9):
    """Destroys answered, then isolad stopped (or was killed) at once: the stop drains the
    teardowns still queued; after a crash the next start removes what a queued one left."""
    if not pd.alive():
        pd.start()
    c, ids = make_some(pd, 4)
    for sid in ids:
        c.delete_sandbox(sid)
    pd.stop(kill9=kill9)
    if kill9:  # what the crash cut short is the next start's to finish
        pd.start()
        ic.wait_for(lambda: not any(network_left(pd, s) for s in ids), 10,
                    what=f"the restart to reclaim {[network_left(pd, s) for s in ids]}")
    else:  # a clean stop leaves nothing, at once
        assert not any(network_left(pd, s) for s in ids), \
            {s: network_left(pd, s) for s in ids}
    if not pd.alive():
        pd.start()


def test_concurrent_creates_get_distinct_blocks(pd):
    """Veths are made outside the host-wide lock, which now covers only the /30 pick and the
    gateway address: creates at once still never share a block, and each sandbox's host
    side holds exactly its own gateway."""
    if not pd.alive():
        pd.start()
    c = sdk(pd)
    api = pd.client()
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        ids = list(ex.map(lambda _: c.create_sandbox().id, range(8)))
    try:
        infos = {sid: api.get_json(f"/v1/sandboxes/{sid}/network") for sid in ids}
        addrs = [i["address"] for i in infos.values()]
        assert len(set(addrs)) == len(addrs), infos
        for sid, i in infos.items():
            out = subprocess.run(["ip", "-4", "-br", "addr", "show", i["interface"]],
                                 capture_output=True, text=True).stdout.split()
            assert out[2:] == [i["gateway"] + "/30"], (sid, out, i)
    finally:
        for sid in ids:
            c.delete_sandbox(sid)


def test_bench_reports_exec_and_file_round_trips(pd):
    """`isola --json bench` reports the exec round trip beside the host's fork+exec of the
    same command, and 4 KiB file write and read round trips (docs/benchmarks.md's keys)."""
    if not pd.alive():
        pd.start()
    p = subprocess.run([str(CLI), "--socket", pd.socket, "--json", "bench", "-n", "2", "-c",
                        "0", "--no-peers"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    j = json.loads(p.stdout)
    for key in ("sequential", "exec_echo", "host_fork_exec_echo", "file_write_4k",
                "file_read_4k"):
        assert key in j, f"`{key}` missing from {sorted(j)}"
        assert j[key]["runs"] == 2 and j[key]["failures"] == 0, (key, j[key])
        assert 0 < j[key]["p50_ms"] <= j[key]["p99_ms"], (key, j[key])
    assert j["ratio_exec_to_host_fork_exec"] > 0, j


def test_bench_density_measures_idle_sandboxes_and_leaves_none(pd):
    """`isola --json bench --density N` keeps N idle sandboxes alive at once, measures each
    one's processes (PSS) and cgroup kernel memory from the host, and destroys them all."""
    if not pd.alive():
        pd.start()
    c = sdk(pd)
    before = {s.id for s in c.list_sandboxes()}
    p = subprocess.run([str(CLI), "--socket", pd.socket, "--json", "bench", "--density", "3"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    j = json.loads(p.stdout)
    assert j["sandboxes"] == 3, j
    # every idle sandbox has at least its agent, found through its host pid's cgroup
    assert j["processes_per_sandbox"] >= 1, j
    assert j["processes_pss_kib"] > 0 and j["cgroup_kernel_kib"] >= 0, j
    assert j["overhead_kib"] >= j["processes_pss_kib"], j
    for key in ("isolad_growth_kib", "host_used_delta_kib", "ls_ms_p50", "ls_empty_ms_p50",
                "create_ms_p50"):
        assert isinstance(j[key], (int, float)), (key, j)
    left = {s.id for s in c.list_sandboxes()} - before
    assert not left, f"bench --density left sandboxes behind: {left}"


def test_bench_density_refuses_bad_input(pd):
    """A bad count and --tier without --density are usage errors (exit 2) naming the flag."""
    for args, word in ((["--density", "0"], "--density"), (["--tier", "process"], "--tier")):
        p = subprocess.run([str(CLI), "--socket", pd.socket, "bench", *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and word in p.stderr, (args, p.returncode, p.stderr)


def test_bench_times_runc_exec_into_a_running_container(pd):
    """With peers, `isola bench` times `runc exec` into one running container beside isola's
    exec and reports their ratio; the container is gone afterwards."""
    if shutil.which("runc") is None:
        pytest.fail("runc is not installed (scripts/deps.sh installs it)")
    if not pd.alive():
        pd.start()
    p = subprocess.run([str(CLI), "--socket", pd.socket, "--json", "bench", "-n", "2", "-c",
                        "0"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    j = json.loads(p.stdout)
    rx = j["runc_exec_echo"]
    assert rx["runs"] == 2 and rx["failures"] == 0, rx
    assert 0 < rx["p50_ms"] <= rx["p99_ms"], rx
    assert j["ratio_exec_to_runc_exec"] > 0, j
    left = subprocess.run(["runc", "list", "-q"], capture_output=True, text=True).stdout.split()
    assert not [c for c in left if c.startswith("isola-bench-")], left
