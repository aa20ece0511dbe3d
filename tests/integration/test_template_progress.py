# SPDX-License-Identifier: Apache-2.0
"""`isola template import` progress through the CLI (docs/cli.md "Templates"): with --json the
upload's own progress lines come before the server's phases on stdout; on a terminal one
renderer (src/cli/progress.c, shared with pull and the microvm image wait) draws the upload's
bar with bytes and rate."""
import json
import os
import pty
import select
import subprocess
import uuid

import pytest

import imagebuild


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    d = tmp_path_factory.mktemp("progress")
    tar = d / "image.tar"
    hello = imagebuild.build_hello(d)
    tar.write_bytes(imagebuild.docker_archive(hello))
    return tar


def test_import_json_reports_upload_progress(cli, archive):
    name = f"prog-json-{uuid.uuid4().hex[:6]}"
    cp = cli("template", "import", name, archive, json=True, timeout=180)
    try:
        assert cp.returncode == 0, cp
        events = [json.loads(ln) for ln in cp.stdout.decode().splitlines() if ln.strip()]
        up = [e for e in events if e.get("type") == "progress" and e.get("phase") == "upload"]
        size = archive.stat().st_size
        assert up, f"no upload progress among {events}"
        assert all(0 <= e["done"] <= e["total"] == size for e in up), up
        assert up[-1]["done"] == size, up
        assert events.index(up[-1]) < len(events) - 1 and events[-1]["type"] == "done", events
        others = [e for e in events if e.get("type") == "progress" and e.get("phase") != "upload"]
        assert others, f"the server's phases are missing: {events}"
    finally:
        cli("template", "rm", name)


def test_import_tty_draws_progress_bar(cli, isolad, archive):
    name = f"prog-tty-{uuid.uuid4().hex[:6]}"
    master, slave = pty.openpty()
    p = subprocess.Popen([cli.path, "--socket", isolad.socket, "template", "import", name,
                          str(archive)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave)
    os.close(slave)
    tty = b""
    try:
        out, _ = p.communicate(timeout=180)
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            tty += chunk
        assert p.returncode == 0, (out, tty)
        assert out.decode().strip() == name
        text = tty.decode(errors="replace")
        assert "uploading" in text and "100%" in text and "/s" in text, text
        assert "\033[K" in text, text  # redrawn in place, a terminal's progress line
    finally:
        os.close(master)
        cli("template", "rm", name)
