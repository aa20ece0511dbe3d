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

# Raw QEMU: same kernel, initramfs (with the same agent), image and machine options (the TCG
# translation cache bounded to 64 MiB as isolad bounds it, MVM_TB_MIB), no jail, no cgroup;
# timed from exec to the agent's sync ACK (its first answer).
# The image isolad built for the host template: rootfs-small.ext4 by default, rootfs.ext4 with
# isolad --microvm-image full (docs/microvm.md).
IMG=$(ls "$ST"/templates/host/rootfs*.ext4 | head -1)
INITRD=$(ls "$ST"/microvm/initramfs-*.cpio)
TSC=$(awk -F: '/cpu MHz/{printf "%d", $2*1000; exit}' /proc/cpuinfo)
raw_once() {
	local t0 t1 R QP
	R=$(mktemp -d "$ST/raw-XXXX")
	qemu-img create -q -f qcow2 -F raw -b "$IMG" "$R/d.qcow2" $(( $(stat -c %s "$IMG") + (1 << 30) ))
	t0=$(date +%s%N)
	qemu-system-x86_64 -M microvm,acpi=on,x-option-roms=off -accel tcg,thread=multi,tb-size=64 -cpu max \
		-m 512M -smp 1 -nodefaults -no-user-config -display none -no-reboot \
		-kernel "$K/vmlinuz" -initrd "$INITRD" \
		-append "console=ttyS0 quiet panic=-1 isola.hostname=raw tsc_early_khz=$TSC" \
		-drive "file=$R/d.qcow2,if=none,id=d,format=qcow2" -device virtio-blk-device,drive=d \
		-device virtio-serial-device \
		-chardev "socket,id=a,path=$R/a.sock,server=on,wait=off" \
		-device virtserialport,chardev=a,name=org.isola.agent \
		-chardev "socket,id=q,path=$R/q.sock,server=on,wait=off" -mon chardev=q,mode=control &
	QP=$!
	python3 - "$R" <<'EOF'
import os, socket, sys, time
r = sys.argv[1]
while True:
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(r + "/a.sock"); break
    except OSError:
        time.sleep(0.005)
n = os.urandom(16).hex().encode()
s.sendall(b"\nISOLA-SYNC " + n + b"\n"); s.settimeout(0.15); buf = b""
while b"ISOLA-ACK " + n not in buf:
    try:
        buf += s.recv(4096)
    except socket.timeout:
        q = socket.socket(socket.AF_UNIX); q.connect(r + "/q.sock"); q.close()
EOF
	t1=$(date +%s%N)
	raw_ms+=($(((t1 - t0) / 1000000)))
	kill $QP; wait $QP 2>/dev/null || true
	rm -rf "$R"
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
echo "| ratio | $(python3 -c "print(round($mi/$mr, 2))") |"
echo "| isola runs (ms) | ${isola_ms[*]} |"
echo "| raw runs (ms) | ${raw_ms[*]} |"
echo "| load average at the end | $(cut -d' ' -f1-3 /proc/loadavg) |"
echo "| idle VM host RSS (QEMU, 512M guest, incl. touched guest RAM) | $((RSS_KB / 1024)) MiB |"
