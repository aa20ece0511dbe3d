# SPDX-License-Identifier: Apache-2.0
"""Warm pools (docs/persistence.md "Warm pools"): `--pool TEMPLATE:TIER:N` and
PUT /v1/pools keep N ready sandboxes; a matching create claims one (the tenant's env, labels,
TTL), the pool refills in the background, a non-matching create is cold, pooled sandboxes are
nobody's until claimed, and pools survive isolad restarts. Judged on the host: the state
dir's sandbox directories and the sandboxes' processes, not only GET /v1/pools."""

import json
import os
import re
import subprocess
import time

import pytest

import isola_client as ic
from tenancy_util import ROOT_CONFTEST, Tenant

CLI, Isolad = ROOT_CONFTEST.CLI, ROOT_CONFTEST.Isolad

SIZE = 3
FILL_TIMEOUT = 90


@pytest.fixture(scope="module")
def own():
    d = Isolad(extra_args=["--pool", f"host:process:{SIZE}"])
    yield d
    if d.alive():
        d.destroy_all_sandboxes()
        d.client().request("PUT", "/v1/pools/host/process", json={"size": 0})
        ic.wait_for(lambda: not pooled_ids(d), 60, what="pool drained")
    d.discard()


def pool(d, template="host", tier="process"):
    r = d.client().request("GET", "/v1/pools")
    assert r.status == 200, r
    for p in r.json()["pools"]:
        if (p["template"], p["tier"]) == (template, tier):
            return p
    return None


def on_disk(d):
    """Sandbox ids with a state directory (what isolad keeps on the host)."""
    try:
        return set(os.listdir(os.path.join(d.state_dir, "sandboxes")))
    except FileNotFoundError:
        return set()


def listed(d):
    return {sb["id"] for sb in d.client().list_sandboxes()}


def pooled_ids(d):
    """Sandboxes that exist on the host but in nobody's listing: the pooled ones."""
    return on_disk(d) - listed(d)


def wait_ready(d, n, timeout=FILL_TIMEOUT):
    """Waits until the pool holds exactly n ready sandboxes and nothing else: every pooled
    state dir is a live sandbox's (a surplus one being destroyed has lost its processes
    before its dir goes); returns their ids."""
    def ok():
        p = pool(d)
        ids = pooled_ids(d)
        live = [s for s in ids if ic.sandbox_host_pids(s)]
        return (p and p["ready"] == n and len(ids) == n and len(live) == n and
                p["creating"] == 0)
    ic.wait_for(ok, timeout, interval=0.25, what=f"pool to hold {n} ready (now {pool(d)})")
    return pooled_ids(d)


def create(c, **fields):
    t0 = time.monotonic()
    sb = c.create_sandbox(**fields)
    return sb, time.monotonic() - t0


def test_pool_fills_and_is_invisible(own):
    ids = wait_ready(own, SIZE)
    assert len(ids) == SIZE
    for sid in ids:
        assert ic.sandbox_host_pids(sid), f"pooled {sid} has no processes"
        r = own.client().request("GET", f"/v1/sandboxes/{sid}")
        assert r.status == 404, r  # nobody's: not even the operator reaches it
        r = own.client().request("DELETE", f"/v1/sandboxes/{sid}")
        assert r.status == 404, r
    p = pool(own)
    assert (p["size"], p["ready"]) == (SIZE, SIZE), p
    # Not in the metrics' sandbox count either (no other sandbox exists here).
    m = own.client().request("GET", "/metrics").text
    running = [ln for ln in m.splitlines()
               if ln.startswith('isola_sandboxes{state="running",tier="process"}')]
    assert all(ln.endswith(" 0") for ln in running), running
    # The pool's own gauge counts them.
    assert f"\nisola_pool_sandboxes {SIZE}\n" in m, [ln for ln in m.splitlines()
                                                   if "pool" in ln]


def test_claims_then_cold_then_refill(own):
    c = own.client()
    before = wait_ready(own, SIZE)
    base = pool(own)
    made = []
    try:
        for i in range(SIZE):
            sb, _ = create(c, env={"WHO": f"claim{i}"}, labels={"n": str(i)}, ttl=600)
            made.append(sb)
            assert sb["pooled"] is True, sb
            assert sb["id"] in before, "a claim must hand over a pooled sandbox"
            assert sb["labels"] == {"n": str(i)} and sb["tenant"] == "default"
            assert sb["expires_at"] and sb["expires_at"] - time.time() > 500
        cold, _ = create(c)
        made.append(cold)
        assert cold["pooled"] is False and cold["id"] not in before
        p = pool(own)
        assert p["claims"] - base["claims"] == SIZE, p
        assert p["misses"] - base["misses"] >= 1, p
        # The tenant's settings reach the sandbox (read inside it).
        for i, sb in enumerate(made[:SIZE]):
            assert c.sh(sb["id"], "echo $WHO") == f"claim{i}\n"
            assert sb["id"] in listed(own)
        # Refill: SIZE new pooled sandboxes, none of them the claimed ones.
        after = wait_ready(own, SIZE)
        assert not (after & {sb["id"] for sb in made})
    finally:
        for sb in made:
            c.delete_sandbox(sb["id"])


def test_claims_have_distinct_hostnames(own):
    c = own.client()
    wait_ready(own, SIZE)
    a, _ = create(c)
    b, _ = create(c)
    try:
        assert a["pooled"] and b["pooled"]
        ha, hb = c.sh(a["id"], "hostname"), c.sh(b["id"], "hostname")
        assert ha != hb and ha.strip() == a["id"], (ha, hb)
    finally:
        c.delete_sandbox(a["id"])
        c.delete_sandbox(b["id"])


def test_claims_have_distinct_machine_ids(own):
    """The claim refreshes the identity (core's agent `identity` op): two claims must not
    share /etc/machine-id."""
    c = own.client()
    wait_ready(own, SIZE)
    a, _ = create(c)
    b, _ = create(c)
    try:
        assert a["pooled"] and b["pooled"]
        ma = c.sh(a["id"], "cat /etc/machine-id")
        mb = c.sh(b["id"], "cat /etc/machine-id")
        assert re.fullmatch(r"[0-9a-f]{32}\n", ma), ma
        assert ma != mb, (ma, mb)
    finally:
        c.delete_sandbox(a["id"])
        c.delete_sandbox(b["id"])


def test_non_matching_request_is_cold(own):
    c = own.client()
    before = wait_ready(own, SIZE)
    base = pool(own)
    sb, _ = create(c, memory="300M")
    try:
        assert sb["pooled"] is False and sb["id"] not in before
        assert pooled_ids(own) == before  # the pool was not touched
        assert pool(own)["claims"] == base["claims"]
    finally:
        c.delete_sandbox(sb["id"])


def test_tenant_claim_quota_and_operator_only(own):
    t = Tenant(own, max_sandboxes=1)
    try:
        wait_ready(own, SIZE)
        r = t.client.request("GET", "/v1/pools")
        assert r.status == 403, r
        r = t.client.request("PUT", "/v1/pools/host/process", json={"size": 9})
        assert r.status == 403, r
        assert t.client.list_sandboxes() == []
        sb = t.client.create_sandbox(labels={"mine": "yes"})
        assert sb["pooled"] is True and sb["tenant"] == t.name, sb
        assert [s["id"] for s in t.client.list_sandboxes()] == [sb["id"]]
        # The tenant's quota applies to claims like to any create.
        r = t.client.request("POST", "/v1/sandboxes", json={})
        assert r.status == 403 and r.error_code == "quota_exceeded", r
        assert len(pooled_ids(own)) >= SIZE - 1
    finally:
        t.cleanup()


def test_claim_is_audited_as_create(own):
    c = own.client()
    wait_ready(own, SIZE)
    sb, _ = create(c)
    c.delete_sandbox(sb["id"])
    cp = subprocess.run([str(CLI), "--socket", own.socket, "audit", "export"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert cp.returncode == 0, cp
    recs = [json.loads(line) for line in cp.stdout.decode().splitlines()]
    assert any(r.get("action") == "POST /v1/sandboxes" and r.get("target") == sb["id"] and
               r.get("outcome") == "ok" for r in recs), recs[-5:]


def test_put_resizes_and_validates(own):
    c = own.client()
    wait_ready(own, SIZE)
    for path, body in (("/v1/pools/host/process", {"size": -1}),
                       ("/v1/pools/host/process", {"size": 100000}),
                       ("/v1/pools/host/teleport", {"size": 1}),
                       ("/v1/pools/host/process", {"sise": 1})):
        r = c.request("PUT", path, json=body)
        assert r.status == 400, (path, body, r)
    r = c.request("PUT", "/v1/pools/no-such-template/process", json={"size": 1})
    assert r.status == 404, r
    r = c.request("PUT", "/v1/pools/host/process", json={"size": 1})
    assert r.status == 200 and r.json()["size"] == 1, r
    ids = wait_ready(own, 1)
    assert len(ids) == 1
    r = c.request("PUT", "/v1/pools/host/process", json={"size": SIZE})
    assert r.status == 200, r
    wait_ready(own, SIZE)


def test_pool_survives_restarts(own):
    before = wait_ready(own, SIZE)
    own.restart()
    # Re-attached and kept: the same sandboxes, nothing recreated.
    assert wait_ready(own, SIZE) == before
    own.restart(kill9=True)
    assert wait_ready(own, SIZE) == before
    sb, _ = create(own.client())
    assert sb["pooled"] and sb["id"] in before
    own.client().delete_sandbox(sb["id"])


def test_pooled_sandbox_lost_while_down_is_replaced(own):
    """A pooled sandbox that died while isolad was down is cleaned up and replaced after the
    restart; the others are kept; none of it shows up in anyone's listing."""
    before = wait_ready(own, SIZE)
    victim = sorted(before)[0]
    init = ic.sandbox_init_pid(victim)
    own.stop(kill9=True)
    os.kill(init, 9)
    ic.wait_for(lambda: ic.proc_status(init) is None or
                ic.proc_status(init).get("State", "").startswith("Z"), 10, what="init gone")
    own.start()
    after = wait_ready(own, SIZE)
    assert victim not in after and victim not in on_disk(own)
    assert before - {victim} <= after
    assert listed(own) == set()


def test_pool_size_is_stored(own):
    """A size set through the API outlives a restart without the flag; size 0 drains."""
    c = own.client()
    r = c.request("PUT", "/v1/pools/host/process", json={"size": 2})
    assert r.status == 200, r
    wait_ready(own, 2)
    flags = own.extra_args
    own.extra_args = []
    try:
        own.restart()
        p = pool(own)
        assert p and p["size"] == 2, p
        wait_ready(own, 2)
        r = own.client().request("PUT", "/v1/pools/host/process", json={"size": 0})
        assert r.status == 200, r
        ic.wait_for(lambda: not pooled_ids(own), 60, what="pool drained")
        assert pool(own) is None
        assert not any(ic.sandbox_host_pids(s) for s in on_disk(own) - listed(own))
    finally:
        own.extra_args = flags
        own.restart()


def test_cli_pool_ls_and_set(own):
    def run(*args):
        return subprocess.run([str(CLI), "--socket", own.socket, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)
    cp = run("pool", "set", "host", "process", "2")
    assert cp.returncode == 0, cp
    assert b"size 2" in cp.stdout
    wait_ready(own, 2)
    cp = run("pool", "ls")
    assert cp.returncode == 0, cp
    row = [ln.split() for ln in cp.stdout.decode().splitlines() if ln.startswith("host")]
    assert row and row[0][:4] == ["host", "process", "2", "2"], cp.stdout
    cp = run("--json", "pool", "ls")
    assert cp.returncode == 0 and json.loads(cp.stdout)["pools"][0]["size"] == 2, cp
    cp = run("pool", "set", "host", "process", "many")
    assert cp.returncode == 2, cp
    cp = run("pool", "set", "host", "process", str(SIZE))
    assert cp.returncode == 0, cp
    wait_ready(own, SIZE)


@pytest.mark.needs_microvm
def test_microvm_pool_hands_over_a_booted_vm():
    """microvm: the pool keeps a booted VM (no boot snapshot from the tier yet); a claim
    hands it over with the tenant's env in milliseconds instead of a boot's seconds."""
    d = Isolad(extra_args=["--pool", "host:microvm:1"])
    try:
        c = d.client(timeout=ROOT_CONFTEST.MICROVM_CREATE_TIMEOUT)

        def ready():
            p = pool(d, tier="microvm")
            return p and p["ready"] == 1
        ic.wait_for(ready, ROOT_CONFTEST.MICROVM_CREATE_TIMEOUT, interval=1,
                    what=f"microvm pool to fill ({pool(d, tier='microvm')})")
        before = pooled_ids(d)
        assert len(before) == 1
        t0 = time.monotonic()
        r = c.request("POST", "/v1/sandboxes", json={"tier": "microvm", "env": {"WHO": "vm"}},
                      timeout=ROOT_CONFTEST.MICROVM_CREATE_TIMEOUT)
        claim_s = time.monotonic() - t0
        assert r.status == 201, r
        sb = r.json()
        assert sb["pooled"] is True and sb["id"] in before and sb["tier"] == "microvm", sb
        assert c.sh(sb["id"], "echo $WHO; hostname") == f"vm\n{sb['id']}\n"
        assert claim_s < 5, f"a claim took {claim_s:.1f}s"
        c.delete_sandbox(sb["id"])
        r = c.request("PUT", "/v1/pools/host/microvm", json={"size": 0})
        assert r.status == 200, r
        ic.wait_for(lambda: not pooled_ids(d), 120, what="microvm pool drained")
    finally:
        d.discard()


def test_own_hostname_and_binds_are_never_served_from_the_pool(own, tmp_path):
    """A warm sandbox already has its name (its id), network and mounts: a create asking for
    a hostname or binds of its own is a cold one, with what it asked for."""
    c = own.client()
    wait_ready(own, SIZE)
    src = tmp_path / "b"
    src.mkdir()
    (src / "f").write_text("bound\n")
    for fields, check in (
            ({"hostname": "named-1"}, ("hostname", "named-1\n")),
            ({"binds": [{"source": str(src), "destination": "/mnt/b", "readonly": True}]},
             ("cat /mnt/b/f", "bound\n"))):
        sb, _ = create(c, **fields)
        try:
            assert sb["pooled"] is False, sb
            assert c.sh(sb["id"], check[0]) == check[1]
        finally:
            c.delete_sandbox(sb["id"])
