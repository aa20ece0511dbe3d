#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kernel: fetches Debian's linux-image-cloud-amd64 (apt-get download + dpkg -x, nothing else) into
# <state>/kernels/<version>/ and writes the microvm tier's module initramfs next to it.
#
# usage: scripts/kernel.sh [--state-dir DIR] [--agent PATH] [--force]
#
# Result, in <state>/kernels/<version>/ (the newest version is what isolad boots):
#   vmlinuz          the guest kernel
#   modules.cpio     newc archive: lib/isola/modules/*.ko + lib/isola/modules.order
#                    (isolad appends the agent as /init to this at runtime, so the guest
#                    always runs the agent isolad was started with)
#   initramfs.cpio   modules.cpio + the agent as /init (only with --agent; for raw boots in
#                    bench/microvm.sh)
#   VERSION          the kernel release string
set -euo pipefail

state=/var/lib/isola
agent=""
force=0
while [ $# -gt 0 ]; do
	case "$1" in
	--state-dir) state="$2"; shift 2 ;;
	--agent) agent="$2"; shift 2 ;;
	--force) force=1; shift ;;
	-h|--help) sed -n 3,16p "$0"; exit 0 ;;
	*) echo "kernel.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

# Modules in load order: the virtio core first (virtio_mmio finds the devices QEMU's microvm
# machine describes in ACPI), then the drivers. The cloud kernel builds ext4 and crc32c in.
MODULES=(virtio_ring virtio virtio_mmio virtio_blk virtio_console failover net_failover
	virtio_net virtio-rng)

meta=linux-image-cloud-amd64
pkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$pkg" ]; then
	echo "kernel.sh: cannot resolve $meta (apt-get update first?)" >&2
	exit 1
fi
version=${pkg#linux-image-}
dest="$state/kernels/$version"
if [ -f "$dest/modules.cpio" ] && [ -f "$dest/vmlinuz" ] && [ "$force" = 0 ] && [ -z "$agent" ]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$state/kernels"
chmod 0700 "$state" 2>/dev/null || true
work=$(mktemp -d "$state/kernels/.tmp-XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ ! -f "$dest/vmlinuz" ] || [ "$force" = 1 ]; then
	(cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || {
		echo "kernel.sh: apt-get download $pkg failed" >&2
		exit 1
	}
	dpkg -x "$work"/"$pkg"_*.deb "$work/x"
	mkdir -p "$work/out"
	cp "$work/x/boot/vmlinuz-$version" "$work/out/vmlinuz"
	moddir="$work/x/lib/modules/$version"
else
	mkdir -p "$work/out"
	cp "$dest/vmlinuz" "$work/out/vmlinuz"
	moddir=""
fi
echo "$version" >"$work/out/VERSION"

python3 - "$work" "$moddir" "$dest" "$agent" "${MODULES[@]}" <<'EOF'
import lzma, os, stat, sys

work, moddir, dest, agent, mods = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]

def entry(name, mode, data=b"", ino=[1]):
    ino[0] += 1
    nb = name.encode() + b"\0"
    hdr = "070701" + "".join("%08X" % v for v in (
        ino[0], mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
    out = hdr.encode() + nb
    out += b"\0" * (-len(out) % 4)
    out += data + b"\0" * (-len(data) % 4)
    return out

def find(name):
    if not moddir:
        return None
    for root, _, files in os.walk(moddir):
        for f in files:
            base = f.split(".ko")[0]
            if base == name or base.replace("-", "_") == name.replace("-", "_"):
                return os.path.join(root, f)
    return None

body = b"".join(entry(d, stat.S_IFDIR | 0o755) for d in ("lib", "lib/isola", "lib/isola/modules"))
order = []
if moddir:
    for m in mods:
        p = find(m)
        if not p:
            sys.exit("kernel.sh: module %s not found in the package" % m)
        data = open(p, "rb").read()
        if p.endswith(".xz"):
            data = lzma.decompress(data)
        elif p.endswith(".zst"):
            sys.exit("kernel.sh: zstd-compressed modules need python3-zstandard; not supported")
        fname = m.replace("-", "_") + ".ko"
        body += entry("lib/isola/modules/" + fname, stat.S_IFREG | 0o644, data)
        order.append(fname)
    body += entry("lib/isola/modules.order", stat.S_IFREG | 0o644, ("\n".join(order) + "\n").encode())
    # No trailer: isolad appends /init and the TRAILER!!! record.
    open(os.path.join(work, "out", "modules.cpio"), "wb").write(body)
else:
    body = open(os.path.join(dest, "modules.cpio"), "rb").read()
    open(os.path.join(work, "out", "modules.cpio"), "wb").write(body)
if agent:
    data = open(agent, "rb").read()
    full = body + entry("init", stat.S_IFREG | 0o755, data) + entry("TRAILER!!!", 0)
    full += b"\0" * (-len(full) % 512)
    open(os.path.join(work, "out", "initramfs.cpio"), "wb").write(full)
EOF

chmod 0644 "$work"/out/*
rm -rf "$dest.old"
[ -d "$dest" ] && mv "$dest" "$dest.old"
mv "$work/out" "$dest"
rm -rf "$dest.old"
echo "$dest"
