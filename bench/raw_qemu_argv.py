# SPDX-License-Identifier: Apache-2.0
"""bench/microvm.sh's raw QEMU boot: isolad's own QEMU command line (the NUL-separated
/proc/PID/cmdline of a microvm sandbox's QEMU) made runnable outside isolad's jail. The jail's
kernel, initramfs and template image paths become the files themselves, the sandbox's vm dir
becomes @R@ and the guest RAM's dir @SHM@ (the script substitutes both per boot), the name is
isola-raw, and the NIC goes (its -netdev tap/-device pair and isola.net on the kernel command
line: the tap is isolad's). Prints one argument per line; exits non-zero naming any jail path
left unmapped, so a change to isolad's argv (src/isolad/tiers/microvm/argv.c) cannot pass
silently.

usage: raw_qemu_argv.py CMDLINE_FILE KERNEL INITRD IMAGE"""
import sys
path, kernel, initrd, img = sys.argv[1:]
argv = [a.decode() for a in open(path, "rb").read().split(b"\0")[:-1]]
files = {"/k/vmlinuz": kernel, "/k/initramfs.cpio": initrd, "/t/rootfs.ext4": img}
out, i = [], 0
while i < len(argv):
    a = argv[i]
    if a == "-netdev" and argv[i + 1].startswith("tap,"):
        i += 4  # -netdev tap,id=net0,fd=N -device virtio-net-device,netdev=net0
        continue
    if out and out[-1] == "-name":
        a = "isola-raw"
    elif out and out[-1] == "-append":
        a = " ".join(w for w in a.split() if not w.startswith("isola.net="))
    elif a in files:
        a = files[a]
    else:
        for jail, real in files.items():
            a = a.replace("=" + jail, "=" + real)
        a = a.replace("=/mem/", "=@SHM@/").replace("=/vm/", "=@R@/")
    out.append(a)
    i += 1
left = [a for a in out if any(p in a for p in ("=/vm/", "=/mem/", "/k/", "/t/", "tap,"))]
if left:
    sys.exit(f"bench: isolad's QEMU command has jail paths this script does not map: {left}")
print("\n".join(out))
