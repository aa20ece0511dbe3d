# SPDX-License-Identifier: Apache-2.0
"""Python SDK: upload_dir / download_dir of 20,000 files and of a 2 GB tree, checksums equal
both ways (before the agent-channel fix, download_dir of 4,000+ small files failed with
IncompleteRead)."""
import json
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from transfer_util import MAKE_MANY_PY, MANIFEST_PY, local_manifest, make_local_tree  # noqa: E402


def remote_manifest(sb, path):
    r = sb.exec(["python3", "-c", MANIFEST_PY, path, "/tmp/manifest.json"], timeout=600)
    assert r.exit_code == 0, r
    return json.loads(sb.files.read("/tmp/manifest.json"))


def test_sdk_20000_files_both_ways(client, tmp_path):
    sb = client.create_sandbox(labels={"suite": "sdk"})
    try:
        r = sb.exec(["python3", "-c", MAKE_MANY_PY, "/tmp/many", "20000", "1024"], timeout=600)
        assert r.exit_code == 0, r
        want = remote_manifest(sb, "/tmp/many")
        assert len(want) == 20000
        names = sb.files.download_dir("/tmp/many", tmp_path / "back")
        assert len([n for n in names if "/f" in n]) == 20000
        assert local_manifest(tmp_path / "back") == want
        src = tmp_path / "up"
        make_local_tree(src, 20000, 1024)
        sb.files.mkdir("/tmp/up")
        sb.files.upload_dir(src, "/tmp/up")
        assert remote_manifest(sb, "/tmp/up") == local_manifest(src)
    finally:
        sb.delete()


# Slow: 2 GB made, hashed and copied twice (the SDK spools the archive to a temporary file).
# The process tier's writable layer is tmpfs today: memory and disk sized so 2 GB fits.
def test_sdk_2gb_tree_both_ways(client, tmp_path):
    sb = client.create_sandbox(labels={"suite": "sdk"}, memory="3G", disk="3G")
    try:
        r = sb.exec("mkdir -p /tmp/big/sub && for i in 0 1 2 3 4 5 6 7; do head -c 268435456 "
                    "/dev/urandom > /tmp/big/sub/b$i || exit 1; done", timeout=600)
        assert r.exit_code == 0, r
        want = remote_manifest(sb, "/tmp/big")
        sb.files.download_dir("/tmp/big", tmp_path / "big")
        assert local_manifest(tmp_path / "big") == want
        sb.files.remove("/tmp/big", recursive=True)  # tmpfs: two copies would not fit
        sb.files.mkdir("/tmp/big")
        sb.files.upload_dir(tmp_path / "big", "/tmp/big")
        assert remote_manifest(sb, "/tmp/big") == want
    finally:
        sb.delete()
