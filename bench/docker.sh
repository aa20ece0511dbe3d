#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/docker.sh: `docker run --rm --runtime isola IMG true` against `--runtime runc` in the
# same run (issue 19's target: isola p50 <= 1.0x runc). A private isolad and a private dockerd
# (own --data-root/--exec-root/--pidfile/socket, vfs), a tiny image imported from host
# binaries; the two runtimes alternate run by run so load hits both alike.
# Network: `--network none` (default): dockerd without iptables or a bridge, containers on
# `--network none` (isola: its own network). `--network bridge`: dockerd in a network namespace
# of the bench's own (ip netns add; removed at exit) with Docker's default bridge, iptables and
# docker-proxy there, containers on the default bridge (isola: libnetwork's prestart hook
# programs an empty namespace of isola-runc's, docs/oci.md).
# Usage: bench/docker.sh [-n RUNS] [--network none|bridge] [--no-build]   (RUNS per runtime, default 30)
# $ISOLA_TEST_UID_BASE, when set, is the private isolad's --uid-base (beside other isolads).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench: run as root"; exit 1; }
runs=30
build=1
network=none
while [ $# -gt 0 ]; do
	case "$1" in
	-n) runs=$2; shift 2 ;;
	--network) network=$2; shift 2 ;;
	--no-build) build=0; shift ;;
	*) echo "bench/docker.sh: unknown argument \`$1\` (-n RUNS, --network none|bridge, --no-build)"; exit 1 ;;
	esac
done
case "$network" in
none | bridge) ;;
*) echo "bench/docker.sh: --network \`$network\`: expected none or bridge"; exit 1 ;;
esac
if [ "$build" = 1 ]; then
	scripts/deps.sh
	scripts/build.sh
fi
command -v dockerd >/dev/null || { echo "bench: dockerd missing (scripts/deps.sh: docker.io)"; exit 1; }
docker=/usr/bin/docker
[ -x "$docker" ] || docker=$(command -v docker)

dir=$(mktemp -d /tmp/isola-bdk-XXXXXX)
isock=$dir/isolad.sock
dsock=$dir/docker.sock
cleanup() {
	local dpid
	dpid=$(cat "$dir/dockerd.pid" 2>/dev/null || true)
	if [ -n "$dpid" ]; then
		kill "$dpid" 2>/dev/null || true
		for _ in $(seq 1 300); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
	fi
	# Sandboxes outlive an isolad stop (re-attached at its next start): destroy them first.
	if [ -n "${ipid:-}" ]; then
		for sb in $(build/src/cli/isola --socket "$isock" ls -q 2>/dev/null); do
			build/src/cli/isola --socket "$isock" rm -f "$sb" >/dev/null 2>&1 || true
		done
		kill "$ipid" 2>/dev/null && wait "$ipid" 2>/dev/null
	fi
	if [ -n "${netns:-}" ]; then
		# dockerd's netns bind mounts under our dir, then our namespace.
		grep -o " $dir/[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l || true
		# What dockerd left in our namespace (docker-proxy), by pid.
		for p in $(ip netns pids "$netns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns delete "$netns" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

build/src/isolad/isolad --state-dir "$dir/isolad" --socket "$isock" --log-level warn \
	--agent build/src/agent/isola-agent ${ISOLA_TEST_UID_BASE:+--uid-base "$ISOLA_TEST_UID_BASE"} \
	2>"$dir/isolad.log" &
ipid=$!
for _ in $(seq 1 200); do [ -S "$isock" ] && break; sleep 0.05; done
if [ "$network" = bridge ]; then
	netns=isola-bdk-$$
	ip netns add "$netns"
	ip -n "$netns" link set lo up
	# nsenter: the network namespace only (isola-runc's mounts stay visible to isolad).
	netcmd=(nsenter "--net=/run/netns/$netns")
	netopts=()
else
	netcmd=()
	netopts=(--iptables=false --ip6tables=false --bridge=none --userland-proxy=false)
fi
ISOLA_SOCKET=$isock setsid "${netcmd[@]}" dockerd --data-root "$dir/data" --exec-root "$dir/exec" \
	--pidfile "$dir/dockerd.pid" -H "unix://$dsock" "${netopts[@]}" --storage-driver=vfs \
	--add-runtime "isola=$PWD/build/src/runc/isola-runc" >"$dir/dockerd.log" 2>&1 </dev/null &
dk() { "$docker" -H "unix://$dsock" "$@"; }
for _ in $(seq 1 600); do dk version >/dev/null 2>&1 && break; sleep 0.1; done
dk version >/dev/null

# The image: sh and true with their libraries.
root=$dir/rootfs
mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/sys" "$root/tmp" "$root/etc"
for b in sh true; do
	src=$(type -P "$b")
	cp "$(readlink -f "$src")" "$root/bin/$b"
	for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
		mkdir -p "$root$(dirname "$lib")"
		cp -n "$(readlink -f "$lib")" "$root$lib"
	done
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
tar -C "$root" -cf "$dir/rootfs.tar" .
dk import "$dir/rootfs.tar" isola-bench:1 >/dev/null

# One warm-up each, then alternate.
dk run --rm --runtime runc --network "$network" isola-bench:1 true
dk run --rm --runtime isola --network "$network" isola-bench:1 true
: >"$dir/runc.ms"
: >"$dir/isola.ms"
for _ in $(seq 1 "$runs"); do
	for rt in runc isola; do
		t0=$(date +%s%N)
		dk run --rm --runtime "$rt" --network "$network" isola-bench:1 true
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000)) >>"$dir/$rt.ms"
	done
done

pct() { sort -n "$1" | awk -v p="$2" '{a[NR]=$1} END {i=int(NR*p/100+0.5); if (i<1) i=1; printf "%.1f", a[i]/1000}'; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB," \
	"kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), docker $(dockerd --version | cut -d' ' -f3 | tr -d ,), $runs runs each, network $network"
r50=$(pct "$dir/runc.ms" 50)
i50=$(pct "$dir/isola.ms" 50)
echo "runc  p50 ${r50} ms  p90 $(pct "$dir/runc.ms" 90) ms"
echo "isola p50 ${i50} ms  p90 $(pct "$dir/isola.ms" 90) ms"
awk -v a="$i50" -v b="$r50" 'BEGIN {printf "isola/runc p50 %.2f\n", a/b}'
