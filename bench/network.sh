#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/network: the egress proxy's cost — a 100 MB download and small-request latency from a
# local server (in a network namespace of its own, tests/integration/netlab.py), once from a
# sandbox through the proxy and once straight from the host; prints both and the ratios.
# Usage: bench/network.sh [MB] [REQUESTS]     (defaults 100 and 50; run as root)
# ISOLA_BUILD (default build/) and ISOLA_AGENT name the binaries, as for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench: run as root"; exit 1; }
export ISOLA_BUILD=${ISOLA_BUILD:-$PWD/build}
export ISOLA_AGENT=${ISOLA_AGENT:-$ISOLA_BUILD/src/agent/isola-agent}
MB=${1:-100}
REQS=${2:-50}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, kernel $(uname -r)," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec /usr/bin/python3 - "$MB" "$REQS" <<'EOF'
import json, statistics, subprocess, sys
sys.path.insert(0, "tests/integration")
import netlab

MB, REQS = int(sys.argv[1]), int(sys.argv[2])
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
    direct = json.loads(subprocess.run([sys.executable, "-c", CLIENT, *args],
                                       capture_output=True, text=True, check=True).stdout)
    res = c.exec(sid, cmd=["python3", "-c", CLIENT, *args], timeout=600, http_timeout=700)
    proxied = json.loads(res["stdout"])
    for name, r in (("direct (host)", direct), ("proxy (sandbox)", proxied)):
        assert r["bytes"] > size, (name, r)
    def mbps(r):
        return r["bytes"] / r["seconds"] / 1e6
    def med(r):
        return statistics.median(r["latency_ms"])
    print(f"| measure | direct (host) | through the proxy (sandbox) | ratio |")
    print(f"|---|---|---|---|")
    print(f"| {MB} MB download | {direct['seconds']:.2f} s ({mbps(direct):.0f} MB/s) | "
          f"{proxied['seconds']:.2f} s ({mbps(proxied):.0f} MB/s) | "
          f"{proxied['seconds'] / direct['seconds']:.2f}x time |")
    print(f"| small GET, time to first byte (median of {REQS}) | {med(direct):.2f} ms | "
          f"{med(proxied):.2f} ms | +{med(proxied) - med(direct):.2f} ms |")
finally:
    if d is not None:
        netlab.stop_isolad(d)
    lab.close()
EOF
