#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench: starts a private isolad and runs `isola bench` (isola's loop beside bwrap and runc).
# Usage: bench/run.sh [ISOLA BENCH ARGS...]   e.g. bench/run.sh -n 50 -c 50 --json
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench: run as root"; exit 1; }
scripts/deps.sh
scripts/build.sh

state=$(mktemp -d /tmp/isola-bench-XXXXXX)
sock=$state/isolad.sock
# No microvm image build in the background beside the timed runs (the loop is the process
# tier's; `isola bench` would wait for one anyway).
ISOLA_MICROVM_PREBUILD=0 build/src/isolad/isolad --state-dir "$state" --socket "$sock" --log-level warn \
	2>"$state/isolad.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$state"' EXIT
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB," \
	"kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
build/src/cli/isola --socket "$sock" bench "$@"
