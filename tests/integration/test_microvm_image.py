# SPDX-License-Identifier: Apache-2.0
"""The microvm tier's default image (docs/microvm.md, "Root disk from templates"): isolad builds
the host template's small image (the package closure of a coding agent's Debian packages) in the
background at start, shows the build in GET /v1/templates/host, a microvm create during the build
says so through the CLI, and the image holds python3, node, git, gcc (compile + run) and curl in a
bounded size."""
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tenancy_util import ROOT_CONFTEST

pytestmark = pytest.mark.needs_microvm

Isolad = ROOT_CONFTEST.Isolad
CLI = ROOT_CONFTEST.CLI
IMAGE_MAX = 1200 << 20  # the small image; the full host /usr here is ~10 GiB
STATE_MAX = 1500 * 1000 * 1000  # the brief's bound on the state dir after the first create


def du(path):
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, check=True, timeout=120)
    return int(out.stdout.split()[0])


@pytest.fixture(scope="module")
def fresh():
    """A fresh isolad that builds the host template's microvm image at start."""
    d = Isolad(extra_env={"ISOLA_MICROVM_PREBUILD": "1", "ISOLA_MICROVM_EXCLUDE": ""})
    yield d
    d.discard()


def test_build_progress_then_small_image_with_toolchain(fresh):
    api = fresh.client(timeout=60)
    # Right after start the build runs: the template shows it, with a step and progress.
    t = api.get_json("/v1/templates/host")
    seen = [t.get("image_build")]
    assert t["image_size_bytes"] is None, t
    b = t["image_build"]
    assert b and b["state"] == "building", t
    assert b["step"] in ("starting", "packages", "staging", "measuring", "mkfs"), b
    # A microvm create started now waits for it and says so (NDJSON on stderr with --json).
    cp = subprocess.Popen([str(CLI), "--socket", fresh.socket, "--json", "create", "--tier",
                           "microvm"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        t = api.get_json("/v1/templates/host")
        seen.append(t.get("image_build"))
        if t["image_size_bytes"]:
            break
        assert t["image_build"]["state"] == "building", t
        time.sleep(0.5)
    out, err = cp.communicate(timeout=900)
    assert cp.returncode == 0, (out, err.decode(errors="replace")[-2500:])
    sid = json.loads(out)["id"]
    events = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    waits = [e for e in events if e.get("state") == "building image"]
    assert waits, f"the create did not report the image build: {err!r}"
    assert all(e["type"] == "progress" and e["image_build"]["state"] == "building"
               for e in waits), waits
    mkfs = [s for s in seen if s and s.get("step") == "mkfs"]
    assert any(s["total"] > 0 and 0 <= s["done"] <= s["total"] for s in mkfs), seen
    # Built: a bounded image, no build any more, and a bounded state dir.
    t = api.get_json("/v1/templates/host")
    assert t["image_build"] is None and 0 < t["image_size_bytes"] <= IMAGE_MAX, t
    img = Path(fresh.state_dir) / "templates" / "host" / "rootfs-small.ext4"
    assert img.stat().st_size <= IMAGE_MAX
    assert du(fresh.state_dir) <= STATE_MAX, du(fresh.state_dir)
    # What a coding agent needs runs in the guest.
    script = ("set -e; python3 -c 'import json, ssl, sqlite3; print(6*7)'; "
              "node -e 'console.log(40+2)'; git --version; curl --version | head -1; "
              "printf '#include <stdio.h>\\nint main(void){puts(\"cc-ok\");return 0;}\\n' "
              "> /tmp/h.c; gcc -O0 -o /tmp/h /tmp/h.c; /tmp/h; "
              "test -e /etc/ssl/certs/ca-certificates.crt; "
              "test ! -e /usr/bin/qemu-system-x86_64; echo done")
    res = api.exec(sid, cmd=["sh", "-c", script], timeout=600, http_timeout=660)
    assert res.get("exit_code") == 0, res
    lines = res["stdout"].splitlines()
    assert lines[0] == "42" and lines[1] == "42", lines
    assert lines[2].startswith("git version") and lines[3].startswith("curl "), lines
    assert "cc-ok" in lines and lines[-1] == "done", lines
    api.delete_sandbox(sid)
