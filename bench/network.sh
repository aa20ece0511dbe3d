#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/network: the egress proxy's cost — a 100 MB download and small-request latency from a
# local server (in a network namespace of its own, tests/integration/netlab.py), once from a
# sandbox through the proxy and once straight from the host, ROUNDS times interleaved (direct,
# proxied, direct, ...: a noisy host moves both alike); prints the medians and the ratios.
# `isola bench --egress URL` is the CLI's form of the download half (curl on both sides, any
# server; docs/benchmarks.md); this script also times small requests and builds its own lab.
# Usage: bench/network.sh [MB] [REQUESTS] [ROUNDS]     (defaults 100, 50 and 5; run as root)
# ISOLA_BUILD (default build/) and ISOLA_AGENT name the binaries, as for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench: run as root"; exit 1; }
export ISOLA_BUILD=${ISOLA_BUILD:-$PWD/build}
export ISOLA_AGENT=${ISOLA_AGENT:-$ISOLA_BUILD/src/agent/isola-agent}
MB=${1:-100}
REQS=${2:-50}
ROUNDS=${3:-5}
[[ "$MB$REQS$ROUNDS" =~ ^[0-9]+$ && $MB -gt 0 && $REQS -gt 0 && $ROUNDS -gt 0 ]] ||
	{ echo "usage: bench/network.sh [MB] [REQUESTS] [ROUNDS] (positive integers)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, kernel $(uname -r)," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec /usr/bin/python3 - "$MB" "$REQS" "$ROUNDS" <<'EOF'
import json, os, statistics, subprocess, sys
sys.path.insert(0, "tests/integration")
import netlab

MB, REQS, ROUNDS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
CLIENT = r'''
import socket, sys, time, json
ip, host, size, reqs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def get(path):
    s = socket.create_connection((ip, 80), timeout=60)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    n = 0
    first = None
    while True:
        b = s.recv(1 << 18)
        if first is None: first = time.perf_counter()
        if not b: break
        n += len(b)
    s.close()
    return n, first
lat = []
for _ in range(reqs):
    t0 = time.perf_counter(); _, first = get("/"); lat.append((first - t0) * 1000)
t0 = time.perf_counter(); n, _ = get(f"/big/{size}"); dt = time.perf_counter() - t0
print(json.dumps({"bytes": n, "seconds": dt, "latency_ms": sorted(lat)}))
'''

lab = netlab.Lab()
d = None
try:
    d = netlab.start_isolad("--log-level", "warn")
    c = d.client(timeout=600)
    sid = c.create_sandbox(network={"allow": ["allowed.test"]})["id"]
    size = MB * 1000 * 1000
    args = [netlab.WEB, "allowed.test", str(size), str(REQS)]
    runs = {"direct": [], "proxied": []}
    cpu_s = 0.0  # isolad's CPU (the proxy's relaying) over the proxied rounds
    def isolad_cpu():
        f = open(f"/proc/{d.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    for _ in range(ROUNDS):
        runs["direct"].append(json.loads(subprocess.run(
            [sys.executable, "-c", CLIENT, *args],
            capture_output=True, text=True, check=True).stdout))
        t0 = isolad_cpu()
        res = c.exec(sid, cmd=["python3", "-c", CLIENT, *args], timeout=600, http_timeout=700)
        cpu_s += isolad_cpu() - t0
        runs["proxied"].append(json.loads(res["stdout"]))
    for name, rs in runs.items():
        for r in rs:
            assert r["bytes"] > size, (name, r)
    secs = {k: statistics.median(r["seconds"] for r in rs) for k, rs in runs.items()}
    lat = {k: statistics.median(x for r in rs for x in r["latency_ms"]) for k, rs in runs.items()}
    pairs = sorted(p["seconds"] / d["seconds"] for d, p in zip(runs["direct"], runs["proxied"]))
    mbps = {k: size / v / 1e6 for k, v in secs.items()}
    print(f"| measure (median of {ROUNDS} interleaved rounds) | direct (host) | "
          f"through the proxy (sandbox) | ratio |")
    print(f"|---|---|---|---|")
    print(f"| {MB} MB download | {secs['direct']:.2f} s ({mbps['direct']:.0f} MB/s) | "
          f"{secs['proxied']:.2f} s ({mbps['proxied']:.0f} MB/s) | "
          f"{mbps['proxied'] / mbps['direct']:.2f}x throughput "
          f"(per round {1 / pairs[-1]:.2f}-{1 / pairs[0]:.2f}) |")
    print(f"| small GET, time to first byte (median of {REQS * ROUNDS}) | "
          f"{lat['direct']:.2f} ms | {lat['proxied']:.2f} ms | "
          f"+{lat['proxied'] - lat['direct']:.2f} ms |")
    print(f"| isolad's CPU per GB proxied (the relay, all rounds) | - | "
          f"{cpu_s / (size * ROUNDS / 1e9):.2f} s | |")
finally:
    if d is not None:
        netlab.stop_isolad(d)
    lab.close()
EOF
