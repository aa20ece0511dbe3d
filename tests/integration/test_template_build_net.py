# SPDX-License-Identifier: Apache-2.0
"""`isola template build --allow`: a RUN step reaches an allowed name served by the netlab (a
local "internet" in a test network namespace, judged at its sinks), and a RUN of a build
without `--allow` reaches nothing. No address beyond loopback and the lab's namespace."""

import json
import subprocess
import uuid

import netlab
from netlab import WEB, OTHER
from netlab import lab, nd  # noqa: F401 (the lab and an isolad resolving through it)

FETCH = (
    "RUN python3 - <<'PY'\n"
    "import urllib.request\n"
    "for name in ('allowed.test', 'other.test'):\n"
    "    try:\n"
    "        body = urllib.request.urlopen(f'http://{name}/', timeout=30).read().decode()\n"
    "        print('REACHED', name, body.strip())\n"
    "    except Exception as e:\n"
    "        print('BLOCKED', name, type(e).__name__)\n"
    "PY\n")


def build(nd, name, ctx, *args):
    cp = subprocess.run([str(netlab.root.CLI), "--socket", nd.socket, "--json", "template",
                         "build", *args, name, str(ctx)], capture_output=True, text=True,
                        timeout=600)
    events = [json.loads(x) for x in cp.stdout.splitlines() if x.strip()]
    assert cp.returncode == 0 and events[-1]["type"] == "done", (cp.stdout[-3000:], cp.stderr)
    return [e["line"] for e in events if e["type"] == "output"]


def test_run_with_allow_reaches_the_allowed_name_only(nd, lab, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM host\n" + FETCH)

    m = lab.mark()
    lines = build(nd, f"allow-{uuid.uuid4().hex[:6]}", ctx, "--allow", "allowed.test")
    assert len(lines) == 2 and lines[0] == f"REACHED allowed.test hello from {WEB}:80", lines
    assert lines[1].startswith("BLOCKED other.test"), lines
    conns = lab.connections(m)
    assert [x[1] for x in conns] == [f"{WEB}:80"], conns
    assert b"Host: allowed.test" in conns[0][2], conns
    assert not lab.connections(m, dest=OTHER), lab.events(m)

    # The same step without --allow: a cache miss (the key has the rules), and nothing reached.
    m = lab.mark()
    lines = build(nd, f"deny-{uuid.uuid4().hex[:6]}", ctx)
    assert len(lines) == 2 and all(x.startswith("BLOCKED") for x in lines), lines
    assert lab.connections(m) == [], lab.events(m)
