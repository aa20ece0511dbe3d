# SPDX-License-Identifier: Apache-2.0
"""The automatic warm pool (docs/persistence.md "Automatic pool"), on by default (MAX 32) and
set with `isolad --pool-auto MAX`: keeps host/process sandboxes ready, as many as the most
creates seen in one second within the window (ISOLA_POOL_AUTO_WINDOW_S, shortened here),
capped at MAX and a memory budget, and none once no create came for a window. Its fills wait while a burst is in flight (counted as `deferrals`), and it
never takes capacity a caller's create needs. Judged on the host (the state dir's sandbox
directories and the pooled sandboxes' processes) and by GET /v1/pools's counts."""

import os
import re
import subprocess
import threading

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST
from test_pools import FILL_TIMEOUT, on_disk, pool, pooled_ids

Isolad = ROOT_CONFTEST.Isolad

WINDOW_ENV = "ISOLA_POOL_AUTO_WINDOW_S"


@pytest.fixture
def daemons():
    made = []

    def start(max_, window, *args):
        """max_ None: no --pool-auto at all (isolad's default)."""
        d = Isolad(extra_args=([] if max_ is None else ["--pool-auto", str(max_)]) + list(args),
                   extra_env={WINDOW_ENV: str(window)}, pool_auto=None)
        made.append(d)
        return d

    yield start
    for d in made:
        if d.alive():
            d.destroy_all_sandboxes()
            d.client().request("PUT", "/v1/pools/host/process", json={"size": 0})
            ic.wait_for(lambda: not pooled_ids(d), 60, what="pool drained")
        d.discard()


def concurrent_creates(c, n, **fields):
    """n creates at once; returns the sandboxes (every create must succeed)."""
    out, errors = [], []

    def one():
        try:
            out.append(c.create_sandbox(**fields))
        except Exception as e:  # noqa: BLE001 - reported below with the others
            errors.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def live_pooled(d):
    return {s for s in pooled_ids(d) if ic.sandbox_host_pids(s)}


def wait_filled(d, at_least=1):
    def ok():
        p = pool(d)
        return (p["ready"] >= at_least and (p["ready"] == p["target"] or p["capped"])
                and p["creating"] == 0 and len(live_pooled(d)) == p["ready"])
    ic.wait_for(ok, FILL_TIMEOUT, interval=0.25, what=f"automatic pool filled ({pool(d)})")
    return live_pooled(d)


def test_target_follows_creates_serves_a_claim_and_drains(daemons):
    d = daemons(4, 20)
    c = d.client()
    p = pool(d)
    # Idle: an automatic pool with nothing in it.
    assert (p["auto_max"], p["target"], p["size"], p["ready"]) == (4, 0, 0, 0), p
    assert not pooled_ids(d)
    made = concurrent_creates(c, 3)
    p = pool(d)
    assert 1 <= p["target"] <= 3 and p["misses"] + p["claims"] == 3, p
    claims = p["claims"]
    ready = wait_filled(d)
    assert len(ready) <= 3
    sb = c.create_sandbox(env={"WHO": "claimed"})
    made.append(sb)
    assert sb["pooled"] is True and sb["id"] in ready, (sb, ready)
    assert c.sh(sb["id"], "echo $WHO") == "claimed\n"
    assert pool(d)["claims"] == claims + 1
    # A single stream's refill: the claimed one is replaced.
    after = wait_filled(d)
    assert sb["id"] not in after
    for s in made:
        c.delete_sandbox(s["id"])
    # No create for a window: the target falls to 0 and the pool destroys what it held.
    ic.wait_for(lambda: pool(d)["target"] == 0 and pool(d)["ready"] == 0 and not pooled_ids(d),
                FILL_TIMEOUT, interval=0.5, what=f"automatic pool drained ({pool(d)})")
    assert pool(d)["auto_max"] == 4
    cp = subprocess.run([str(ROOT_CONFTEST.CLI), "--socket", d.socket, "pool", "ls"],
                        capture_output=True, text=True, timeout=60)
    row = [ln.split() for ln in cp.stdout.splitlines() if ln.startswith("host")]
    assert cp.returncode == 0 and row and row[0][:8] == ["host", "process", "0", "0", "0",
                                                         str(claims + 1), row[0][6], "4"], cp


def test_burst_defers_the_fills_then_the_pool_fills(daemons):
    d = daemons(8, 60)
    c = d.client()
    made = concurrent_creates(c, 8)
    p = pool(d)
    # The pool was empty: the burst's creates raised its target, and the fills that
    # triggered waited for the burst instead of competing with it for the CPU.
    assert p["misses"] + p["claims"] == 8 and p["deferrals"] >= 1, p
    for s in made:
        c.delete_sandbox(s["id"])
    assert len(wait_filled(d)) == pool(d)["target"] >= 1


def test_a_refused_create_is_not_counted(daemons):
    """A create is counted (and raises the target) once it is done: one the host refuses
    (no room for a default sandbox, no admission wait) is neither a miss nor demand the pool
    should make sandboxes for."""
    d = daemons(8, 60, "--cpu-overcommit", f"{0.5 / os.cpu_count():.6f}",
                "--admission-wait", "0")
    c = d.client()
    for _ in range(3):
        r = c.request("POST", "/v1/sandboxes", json={}, timeout=60)
        assert r.status == 503 and r.error_code == "unavailable", r
    p = pool(d)
    assert (p["misses"], p["claims"], p["target"], p["creating"]) == (0, 0, 0, 0), p


def test_only_creates_a_fill_could_serve_are_counted(daemons):
    """A pooled sandbox has the default limits: creates that ask for others could never be
    served, so they are not misses and do not raise the target (they would leave up to MAX
    idle sandboxes nobody claims). Limits given equal to the defaults are the defaults: those
    creates are counted, and once the pool has filled one of them is a claim."""
    d = daemons(8, 60)
    c = d.client()
    made = [c.create_sandbox(memory=512 << 20)["id"] for _ in range(3)]
    made.append(c.create_sandbox(cpu=0.5)["id"])
    p = pool(d)
    assert (p["misses"], p["claims"], p["target"]) == (0, 0, 0), p
    made += [c.create_sandbox(memory=256 << 20, cpu=1)["id"] for _ in range(2)]
    p = pool(d)
    assert p["misses"] == 2 and p["claims"] == 0 and p["target"] >= 1, p
    wait_filled(d)
    made.append(c.create_sandbox(memory=256 << 20)["id"])
    assert pool(d)["claims"] == 1, pool(d)
    for sid in made:
        assert c.delete_sandbox(sid).status == 204


def test_never_takes_a_real_creates_capacity(daemons):
    # Room for three default sandboxes (1 CPU each) on any core count.
    d = daemons(8, 60, "--cpu-overcommit", f"{3.5 / os.cpu_count():.6f}")
    c = d.client()
    for s in concurrent_creates(c, 3):
        c.delete_sandbox(s["id"])
    # The pool fills only while room for one more create of its size stays free.
    held = wait_filled(d)
    assert 1 <= len(held) <= 2, held
    # Creates the pool cannot serve (other limits) need the room its sandboxes hold: it
    # yields, destroying them, and every create succeeds.
    made = [c.create_sandbox(memory="200M") for _ in range(3)]
    try:
        assert all(sb["pooled"] is False for sb in made)
        assert not (held & {sb["id"] for sb in made})
        assert not live_pooled(d) and pool(d)["ready"] == 0
        # The host is full: the pool stays empty, and says why.
        ic.wait_for(lambda: pool(d)["capped"], FILL_TIMEOUT, interval=0.25,
                    what=f"automatic pool capped ({pool(d)})")
        p = pool(d)
        assert p["ready"] == 0 and p["failures"] == 0 and not p.get("last_error"), p
    finally:
        for sb in made:
            c.delete_sandbox(sb["id"])


def test_flag_is_checked():
    cp = subprocess.run([ROOT_CONFTEST.ISOLAD, "--pool-auto", "9999"], capture_output=True,
                        text=True, timeout=30)
    assert cp.returncode == 2 and "--pool-auto `9999`" in cp.stderr, cp


def test_single_stream_is_refilled_while_it_runs(daemons):
    """One create at a time (the sequential loop): the pool refills between them, so the
    stream itself is served from it. A fixed pool's rule (wait while creates keep coming,
    up to 3 s) would leave this whole stream cold."""
    d = daemons(2, 60)
    c = d.client()
    served = 0
    for _ in range(12):
        sb = c.create_sandbox()
        served += sb["pooled"]
        assert c.sh(sb["id"], "echo ok") == "ok\n"
        c.delete_sandbox(sb["id"])
    p = pool(d)
    assert served >= 1 and p["claims"] == served and p["deferrals"] == 0, (served, p)


def test_put_auto_max_is_checked_and_stored(daemons):
    d = daemons(0, 60)  # --pool-auto 0: none
    c = d.client()
    assert pool(d) is None
    for path, body, word in (
            ("/v1/pools/host/process", {"auto_max": 3, "size": 1}, "one of"),
            ("/v1/pools/host/process", {}, "one of"),
            ("/v1/pools/host/process", {"auto_max": 999}, "auto_max"),
            ("/v1/pools/host/microvm", {"auto_max": 2}, "host/process only"),
            ("/v1/pools/other/process", {"auto_max": 2}, "host/process only")):
        r = c.request("PUT", path, json=body)
        assert r.status == 400 and word in r.json()["message"], (body, r)
    r = c.request("PUT", "/v1/pools/host/process", json={"auto_max": 3})
    assert r.status == 200 and r.json()["auto_max"] == 3 and r.json()["target"] == 0, r
    # Stored: a start without the flag keeps it (not isolad's default); the flag overrides
    # it.
    d.stop()
    d.extra_args = []
    d.start()
    assert (pool(d)["auto_max"], pool(d)["default"]) == (3, False)
    d.stop()
    d.extra_args = ["--pool-auto", "0"]
    d.start()
    assert pool(d) is None
    # Turned off is stored too: the default does not bring it back at the next start.
    d.stop()
    d.extra_args = []
    d.start()
    assert pool(d) is None
    # A fixed size on the pair replaces it.
    r = d.client().request("PUT", "/v1/pools/host/process", json={"auto_max": 2})
    assert r.status == 200 and r.json()["auto_max"] == 2, r
    r = d.client().request("PUT", "/v1/pools/host/process", json={"size": 1})
    assert r.status == 200 and (r.json()["auto_max"], r.json()["size"]) == (0, 1), r


def test_cli_pool_auto(daemons):
    """`isola pool auto MAX` is the PUT of auto_max; a MAX that is not a number is a usage
    error; isolad's own refusal (past its cap) is passed on."""
    d = daemons(0, 60)
    cli = [str(ROOT_CONFTEST.BUILD / "src" / "cli" / "isola"), "--socket", d.socket]
    cp = subprocess.run(cli + ["pool", "auto", "3"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and cp.stdout == "pool host/process: automatic, at most 3\n", cp
    assert pool(d)["auto_max"] == 3
    cp = subprocess.run(cli + ["pool", "auto", "x"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 2 and "MAX `x` is not a number" in cp.stderr, cp
    cp = subprocess.run(cli + ["pool", "auto", "999"], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 1 and "auto_max" in cp.stderr, cp
    cp = subprocess.run(cli + ["pool", "auto", "0"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and pool(d) is None, (cp, pool(d))


def test_cli_help_names_isolads_default():
    """`isola pool --help` names isolad's default MAX, the one `isolad --help` prints (it said
    8 after the default became 32)."""
    d = subprocess.run([str(ROOT_CONFTEST.ISOLAD), "--help"], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"on by default \(MAX (\d+)\)", d.stdout + d.stderr)
    assert m, d
    c = subprocess.run([str(ROOT_CONFTEST.CLI), "pool", "--help"], capture_output=True,
                       text=True, timeout=60)
    n = re.search(r"isolad's\s+default: (\d+)", c.stdout + c.stderr)
    assert n and n.group(1) == m.group(1), (c, m.group(1))


def test_on_by_default_serves_a_create(daemons):
    """isolad with no --pool-auto and nothing stored: the automatic pool is on with cap 8,
    marked as the default, its target capped by the memory budget (1/64 of MemAvailable at
    1 MiB a sandbox); after a few creates a create is a claim. isolad's stop destroys the
    pool's sandboxes. Size 0 turns it off for good (stored), and a start without the flag
    keeps it off."""
    d = daemons(None, 60)
    c = d.client()
    p = pool(d)
    assert (p["auto_max"], p["default"], p["target"], p["ready"]) == (32, True, 0, 0), p
    with open("/proc/meminfo") as f:
        avail_kib = int(next(ln for ln in f if ln.startswith("MemAvailable:")).split()[1])
    budget = avail_kib // 1024 // 64
    assert 0.75 * budget <= p["memory_cap"] <= 1.25 * budget + 1, (p, avail_kib)
    for sb in concurrent_creates(c, 2):
        c.delete_sandbox(sb["id"])
    held = wait_filled(d)
    sb = c.create_sandbox()
    try:
        assert sb["pooled"] is True and sb["id"] in held, (sb, held)
        assert c.sh(sb["id"], "echo ok") == "ok\n"
    finally:
        c.delete_sandbox(sb["id"])
    # A stop takes the automatic pool's sandboxes with it (a restart would destroy them as
    # surplus anyway): nothing of them is left running or on disk.
    held = wait_filled(d)
    assert held
    d.stop()
    assert not (held & on_disk(d)), (held, on_disk(d))
    assert not any(ic.sandbox_host_pids(s) for s in held)
    d.start()
    c = d.client()
    assert pool(d)["default"] is True
    r = c.request("PUT", "/v1/pools/host/process", json={"size": 0})
    assert r.status == 200, r
    ic.wait_for(lambda: not pooled_ids(d), 60, what="pool drained")
    d.restart()
    assert pool(d) is None
