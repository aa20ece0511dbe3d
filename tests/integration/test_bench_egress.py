# SPDX-License-Identifier: Apache-2.0
"""`isola bench --egress URL`: the egress proxy's throughput against a direct download, run
against netlab's web server (tests/integration/netlab.py) and an isolad resolving through the
lab. Its behaviour only (both sides downloaded the file, the report's keys, the sandbox gone
afterwards, failures named by side, bad flags refused), never its timings."""

import json
import os
import signal
import subprocess
import time

import pytest

import netlab
from netlab import lab, nd  # noqa: F401 (fixtures)
from faults_util import CLI, sdk

SIZE = 5 * 1000 * 1000


def bench(nd, *args, timeout=300):
    return subprocess.run([str(CLI), "--socket", nd.socket, *args], capture_output=True,
                          text=True, timeout=timeout)


def sandboxes(nd):
    return {s.id for s in sdk(nd).list_sandboxes()}


def test_bench_egress_reports_both_sides_and_leaves_no_sandbox(nd):
    before = sandboxes(nd)
    p = bench(nd, "--json", "bench", "--egress", f"http://allowed.test/big/{SIZE}",
              "--egress-resolve", netlab.WEB, "-n", "2")
    assert p.returncode == 0, p.stderr + p.stdout
    j = json.loads(p.stdout)
    assert j["rounds"] == 2 and j["name"] == "allowed.test", j
    assert j["url"] == f"http://allowed.test/big/{SIZE}", j
    assert j["bytes"] == SIZE, j  # both sides, every round: the bench checks they are equal
    for side in ("direct", "proxied"):
        s = j[side]
        assert len(s["seconds"]) == 2 and all(x > 0 for x in s["seconds"]), (side, s)
        assert s["seconds_p50"] > 0 and s["mbps_p50"] > 0, (side, s)
    assert j["ratio_proxied_to_direct"] > 0, j
    assert 0 < j["ratio_per_round_min"] <= j["ratio_per_round_max"], j
    # isolad is on this host's unix socket: its CPU over the proxied downloads is read
    assert j["isolad_cpu_s_per_gb"] >= 0, j
    assert sandboxes(nd) == before, "bench --egress left its sandbox behind"


def test_bench_all_carries_the_egress_report(nd):
    """`isola bench --all --egress URL`: the loops, the density part and the egress part (5
    rounds) in one report; an egress part that fails is named under its key and fails the
    run, with the loops' figures still reported."""
    before = sandboxes(nd)
    p = bench(nd, "--json", "bench", "--all", "-n", "1", "-c", "0", "--no-peers", "--density",
              "1", "--egress", f"http://allowed.test/big/{SIZE}", "--egress-resolve", netlab.WEB)
    assert p.returncode == 0, p.stderr + p.stdout
    j = json.loads(p.stdout)
    assert j["sequential"]["runs"] == 1 and j["density"]["sandboxes"] == 1, j
    e = j["egress"]
    assert e["rounds"] == 5 and e["bytes"] == SIZE and e["ratio_proxied_to_direct"] > 0, e
    p = bench(nd, "--json", "bench", "--all", "-n", "1", "-c", "0", "--no-peers", "--density",
              "1", "--egress", "http://allowed.test:8081/big/1000", "--egress-resolve",
              netlab.WEB)
    assert p.returncode == 1, p.stderr + p.stdout
    j = json.loads(p.stdout)
    assert j["sequential"]["runs"] == 1 and j["density"]["sandboxes"] == 1, j
    assert "the host's direct download" in j["egress"]["error"], j
    assert sandboxes(nd) == before, "bench --all left a sandbox behind"


def test_bench_egress_text_report(nd):
    p = bench(nd, "bench", "--egress", f"http://allowed.test/big/{SIZE}", "--egress-resolve",
              netlab.WEB, "-n", "1")
    assert p.returncode == 0, p.stderr + p.stdout
    assert "through the proxy (sandbox)" in p.stdout and "proxied / direct" in p.stdout, p.stdout
    assert f"{SIZE} bytes per download" in p.stdout, p.stdout


def test_bench_egress_server_down_names_the_host_side(nd):
    """Nothing listens on port 8081 in the lab: the first download, the host's, fails and
    says so; the sandbox is destroyed."""
    before = sandboxes(nd)
    p = bench(nd, "bench", "--egress", "http://allowed.test:8081/big/1000", "--egress-resolve",
              netlab.WEB, "-n", "1")
    assert p.returncode == 1, p.stderr + p.stdout
    assert "the host's direct download" in p.stderr and "8081" in p.stderr, p.stderr
    assert sandboxes(nd) == before, "bench --egress left its sandbox behind"


def test_bench_egress_refusal_names_the_sandbox_side(nd):
    """The lab's DNS answers loop.allowed.test with 127.0.0.1, an always-denied address: the
    host (told WEB) gets the file, the sandbox is refused (by isola's resolver or its proxy)
    and the failure names that side."""
    before = sandboxes(nd)
    p = bench(nd, "bench", "--egress", f"http://loop.allowed.test/big/{SIZE}",
              "--egress-resolve", netlab.WEB, "-n", "1")
    assert p.returncode == 1, p.stderr + p.stdout
    assert "the sandbox's download through the proxy" in p.stderr, p.stderr
    assert sandboxes(nd) == before, "bench --egress left its sandbox behind"


def test_bench_egress_interrupted_destroys_its_sandbox(nd):
    """SIGTERM while the rounds run: the bench stops, says so and destroys its sandbox."""
    before = sandboxes(nd)
    proc = subprocess.Popen([str(CLI), "--socket", nd.socket, "bench", "--egress",
                             "http://allowed.test/big/100000000000", "--egress-resolve",
                             netlab.WEB, "-n", "3"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not (sandboxes(nd) - before):
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "bench --egress made no sandbox"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1 and "interrupted" in err, (proc.returncode, out, err)
    assert sandboxes(nd) == before, "bench --egress left its sandbox behind"


@pytest.mark.parametrize("args,word,why", [
    (["--egress", ""], "--egress", "needs a URL"),
    (["--egress", "https://allowed.test/big/10"], "--egress", "only plain http://"),
    (["--egress", "ftp://allowed.test/x"], "--egress", "only plain http://"),
    (["--egress", "http:///big/10"], "--egress", "no host name"),
    (["--egress", "http://:80/big/10"], "--egress", "no host name"),
    (["--egress", "http://allowed.test:0/x"], "--egress", "port must be 1-65535"),
    (["--egress", "http://allowed.test:80x/x"], "--egress", "port must be 1-65535"),
    (["--egress", "http://user@allowed.test/x"], "--egress", "not a host name"),
    (["--egress-resolve", "198.18.0.1"], "--egress-resolve", "goes with --egress"),
    (["--egress", "http://allowed.test/x", "--egress-resolve", "allowed.test"],
     "--egress-resolve", "not an IPv4 or IPv6 address"),
    (["--egress", "http://allowed.test/x", "--density", "2"], "--density", "two modes"),
])
def test_bench_egress_refuses_bad_input(args, word, why):
    """Usage errors (exit 2) naming the flag and the reason, before isolad is asked anything."""
    p = subprocess.run([str(CLI), "--socket", "/nonexistent/isola.sock", "bench", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and word in p.stderr and why in p.stderr, \
        (args, p.returncode, p.stderr)
    assert "cannot reach" not in p.stderr, p.stderr
