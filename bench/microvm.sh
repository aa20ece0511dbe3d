#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# microvm bench: isola cold create → first command output, beside a raw QEMU boot of the same
# kernel + initramfs to the agent's first answer (same machine, same run), and the host memory
# of one idle VM beyond its guest RAM. Prints a markdown table. Not a timed assertion.
#
# The two are interleaved (one isola create, one raw boot, N times) so that load from other
# work on the machine falls on both alike.
#
# usage: bench/microvm.sh [N]   (needs root, a build ($ISOLA_BUILD, default build/),
#                                scripts/kernel.sh done, a free /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5}
B=${ISOLA_BUILD:-$PWD/build}
K=$(ls -d "${ISOLA_KERNEL_DIR:-/var/lib/isola/kernels}"/*/ | sort -V | tail -1)
ST=$(mktemp -d /tmp/isola-bench-XXXXXX)
chmod 700 "$ST"
SOCK=$ST/s.sock

"$B/src/isolad/isolad" --state-dir "$ST" --socket "$SOCK" --agent "$B/src/agent/isola-agent" \
	>"$ST/isolad.log" 2>&1 &
IPID=$!
trap 'kill $IPID 2>/dev/null; wait $IPID 2>/dev/null; rm -rf "$ST"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

api() { curl -s --max-time 900 --unix-socket "$SOCK" "$@"; }
# The id from the create answer, without a python3 start inside the timed span.
create() {
	api -X POST -H 'content-type: application/json' -d '{"tier":"microvm","memory":"512M"}' \
		http://x/v1/sandboxes | grep -o '"id":"[a-z0-9]*"' | head -1 | cut -d'"' -f4
}
# Warm-up: builds the template image once (not measured).
ID=$(create)
[ -n "$ID" ] || { echo "bench: microvm create failed: $(tail -3 "$ST/isolad.log")"; exit 1; }
QPID=$(pgrep -f "isola-$ID" | head -1)
RSS_KB=$(awk '/^Rss:/{s+=$2} END{print s}' /proc/$QPID/smaps_rollup)
# What the raw boot mirrors (below): isolad's QEMU command line and its overlay's size.
cp "/proc/$QPID/cmdline" "$ST/qemu.argv"
DISK_BYTES=$(qemu-img info -U --output=json "$ST/sandboxes/$ID/vm/disk.qcow2" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')
api -X DELETE "http://x/v1/sandboxes/$ID" >/dev/null

isola_once() {
	local t0 t1
	t0=$(date +%s%N)
	ID=$(create)
	"$B/src/cli/isola" --socket "$SOCK" exec "$ID" -- echo hi >/dev/null
	t1=$(date +%s%N)
	isola_ms+=($(((t1 - t0) / 1000000)))
	api -X DELETE "http://x/v1/sandboxes/$ID" >/dev/null
}

# Raw QEMU: isolad's own command line for the warm-up VM (read from /proc), so the machine,
# devices, accelerator options, kernel command line (isola.disk, which bounds the guest's root
# grow; isola.caps; ...) and QEMU's -sandbox are isolad's. The jail's paths point at the files
# themselves (guest RAM on /dev/shm, a tmpfs as in the jail), and there is no jail, no cgroup
# and no NIC (the tap is isolad's: its -netdev/-device pair and isola.net are dropped). Timed
# from exec to the agent's sync ACK (its first answer).
# The image isolad built for the host template: rootfs-small.ext4 by default, rootfs.ext4 with
# isolad --microvm-image full (docs/microvm.md).
IMG=$(ls "$ST"/templates/host/rootfs*.ext4 | head -1)
INITRD=$(ls "$ST"/microvm/initramfs-*.cpio)
mapfile -t RAW_ARGV < <(python3 bench/raw_qemu_argv.py "$ST/qemu.argv" "$K/vmlinuz" "$INITRD" "$IMG")
[ "${#RAW_ARGV[@]}" -gt 10 ] || { echo "bench: could not read isolad's QEMU command line"; exit 1; }
[ -z "${ISOLA_BENCH_SHOW_ARGV:-}" ] || printf "raw: %s\n" "${RAW_ARGV[@]}" >&2
raw_once() {
	local t0 t1 R SHM QP a
	local -a argv=()
	R=$(mktemp -d "$ST/raw-XXXX")
	SHM=$(mktemp -d /dev/shm/isola-bench-raw-XXXXXX)
	qemu-img create -q -f qcow2 "$R/disk.qcow2" "$DISK_BYTES"
	for a in "${RAW_ARGV[@]}"; do
		a=${a//@R@/$R}
		argv+=("${a//@SHM@/$SHM}")
	done
	t0=$(date +%s%N)
	"${argv[@]}" 2>/dev/null &
	QP=$!
	python3 - "$R" <<'EOF'
import os, socket, sys, time
r = sys.argv[1]
while True:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(r + "/agent.sock"); break
    except OSError:
        time.sleep(0.005)
n = os.urandom(16).hex().encode()
s.sendall(b"\nISOLA-SYNC " + n + b"\n"); s.settimeout(0.15); buf = b""
while b"ISOLA-ACK " + n not in buf:
    try:
        buf += s.recv(4096)
    except socket.timeout:
        q = socket.socket(socket.AF_UNIX); q.connect(r + "/qmp.sock"); q.close()
EOF
	t1=$(date +%s%N)
	raw_ms+=($(((t1 - t0) / 1000000)))
	kill $QP; wait $QP 2>/dev/null || true
	rm -rf "$R" "$SHM"
}

isola_ms=()
raw_ms=()
for _ in $(seq "$N"); do
	isola_once
	raw_once
done

med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
mi=$(med "${isola_ms[@]}"); mr=$(med "${raw_ms[@]}")
echo "| measure (N=$N, $(nproc) cores, TCG) | median |"
echo "|---|---|"
echo "| isola cold create → first command output | ${mi} ms |"
echo "| raw QEMU boot of the same kernel+initramfs → agent answer | ${mr} ms |"
ratio=$(awk -v a="$mi" -v b="$mr" 'BEGIN { printf "%.2f", a / b }')
echo "| ratio | $ratio |"
echo "| isola runs (ms) | ${isola_ms[*]} |"
echo "| raw runs (ms) | ${raw_ms[*]} |"
echo "| load average at the end | $(cut -d' ' -f1-3 /proc/loadavg) |"
echo "| idle VM host RSS (QEMU, 512M guest, incl. touched guest RAM) | $((RSS_KB / 1024)) MiB |"
