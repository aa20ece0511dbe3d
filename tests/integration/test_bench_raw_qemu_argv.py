# SPDX-License-Identifier: Apache-2.0
"""bench/raw_qemu_argv.py: isolad's QEMU command line (as /proc/PID/cmdline holds it) made
runnable outside the jail for bench/microvm.sh's raw boot; a jail path it cannot map fails
the bench instead of leaving its raw command behind isolad's."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "raw_qemu_argv.py"

# The shape src/isolad/tiers/microvm/argv.c gives (a network-attached TCG sandbox).
ISOLAD_ARGV = [
    "/usr/bin/qemu-system-x86_64", "-name", "isola-abc123",
    "-object", "memory-backend-file,id=ram,size=512M,mem-path=/mem/ram,share=on,prealloc=off",
    "-M", "microvm,acpi=on,memory-backend=ram", "-m", "512M", "-smp", "1",
    "-accel", "tcg,thread=multi,tb-size=64", "-sandbox", "on,obsolete=deny",
    "-kernel", "/k/vmlinuz", "-initrd", "/k/initramfs.cpio",
    "-append", "console=ttyS0 isola.hostname=abc123 isola.disk=1073741824 isola.net=10.0.0.2/30",
    "-netdev", "tap,id=net0,fd=3", "-device", "virtio-net-device,netdev=net0",
    "-chardev", "socket,id=qmp,path=/vm/qmp.sock,server=on,wait=off",
    "-blockdev", "driver=file,node-name=base-file,filename=/t/rootfs.ext4,read-only=on",
    "-blockdev", "driver=file,node-name=disk-file,filename=/vm/disk.qcow2",
    "-chardev", "socket,id=agent,path=/vm/agent.sock,server=on,wait=off",
]


def run(tmp_path, argv):
    f = tmp_path / "cmdline"
    f.write_bytes(b"".join(a.encode() + b"\0" for a in argv))
    return subprocess.run([sys.executable, str(SCRIPT), str(f), "/K/vmlinuz", "/S/initrd.cpio",
                           "/S/rootfs-small.ext4"], capture_output=True, text=True, timeout=30)


def test_isolads_command_is_mapped_out_of_the_jail(tmp_path):
    p = run(tmp_path, ISOLAD_ARGV)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[out.index("-name") + 1] == "isola-raw"
    assert out[out.index("-kernel") + 1] == "/K/vmlinuz"
    assert out[out.index("-initrd") + 1] == "/S/initrd.cpio"
    assert "mem-path=@SHM@/ram" in out[out.index("-object") + 1]
    assert "driver=file,node-name=base-file,filename=/S/rootfs-small.ext4,read-only=on" in out
    assert "driver=file,node-name=disk-file,filename=@R@/disk.qcow2" in out
    assert "socket,id=agent,path=@R@/agent.sock,server=on,wait=off" in out
    # The NIC is isolad's: its tap, its device and the guest's address go; the rest stays.
    assert "-netdev" not in out and "virtio-net-device,netdev=net0" not in out
    assert out[out.index("-append") + 1] == \
        "console=ttyS0 isola.hostname=abc123 isola.disk=1073741824"
    assert "-sandbox" in out and "tcg,thread=multi,tb-size=64" in out


def test_an_unmapped_jail_path_fails_naming_it(tmp_path):
    p = run(tmp_path, ISOLAD_ARGV + ["-drive", "file=/k/extra.img"])
    assert p.returncode != 0 and "/k/extra.img" in p.stderr, p
