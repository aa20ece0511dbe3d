# SPDX-License-Identifier: Apache-2.0
"""A microvm whose QEMU exits during boot (docs/microvm.md "When a boot fails"): the create's
error names why — how QEMU ended, the last lines of its stderr and of the guest console —
instead of a bare "QEMU exited during boot", and nothing of the attempt is left.

The failure is real and cheap: isolad is given a kernel directory ($ISOLA_KERNEL_DIR) whose
vmlinuz is not a kernel (its modules.cpio is the real one), so QEMU refuses to load it and exits
before the guest runs. Slow part: the host template's ext4 image is built once for this
isolad's fresh state dir.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from faults_util import Isolad, leftovers, sdk
from faults_util import isola  # the SDK

pytestmark = pytest.mark.needs_microvm


def real_kernel_dir():
    for root in (os.environ.get("ISOLA_KERNEL_DIR", ""), "/var/lib/isola/kernels"):
        for cpio in sorted(Path(root).glob("*/modules.cpio")) if root else ():
            return cpio.parent
    pytest.skip("no guest kernel (scripts/kernel.sh)")


def test_qemu_boot_failure_says_why():
    real = real_kernel_dir()
    kroot = tempfile.mkdtemp(prefix="isola-kd-", dir="/tmp")
    kdir = os.path.join(kroot, real.name)
    os.mkdir(kdir)
    shutil.copy(real / "modules.cpio", kdir)
    for f in ("VERSION",):
        if (real / f).exists():
            shutil.copy(real / f, kdir)
    with open(os.path.join(kdir, "vmlinuz"), "wb") as f:
        f.write(b"this is not a linux kernel\n" * 4096)
    d = Isolad(extra_env={"ISOLA_KERNEL_DIR": kroot})
    try:
        c = sdk(d, timeout=900)
        with pytest.raises(isola.errors.IsolaError) as ei:
            c.create_sandbox(tier="microvm", memory="256M")
        msg = str(ei.value)
        assert "QEMU stderr (last lines): " in msg and "console (last lines): " in msg, msg
        stderr_part = msg.split("QEMU stderr (last lines): ", 1)[1].split(
            "; console (last lines):", 1)[0]
        assert stderr_part != "(nothing)" and "kernel" in stderr_part.lower(), msg
        assert not c.list_sandboxes()
        for name in os.listdir(os.path.join(d.state_dir, "sandboxes")):
            pytest.fail(f"state/sandboxes/{name} left by the failed create: "
                        f"{leftovers(d, name)}")
    finally:
        try:
            d.discard()
        finally:
            shutil.rmtree(kroot, ignore_errors=True)
