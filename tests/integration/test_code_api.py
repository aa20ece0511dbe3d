# SPDX-License-Identifier: Apache-2.0
"""The code interpreter through isolad: the native API (through the Python SDK), `isola code`,
wrong input, tenancy, and the service started again after it was killed.

isolad ships share/interp into the sandbox and starts it on first use (src/isolad/codeint);
everything here goes through the real isolad, agent and service inside a process sandbox.
"""

import base64
import json
import struct
import sys
from pathlib import Path

import pytest

from tenancy_util import Tenant

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402

RUN_TIMEOUT = 240  # s: the first call starts the service and a Python kernel on a busy host
PLOT = ("import matplotlib.pyplot as plt\n"
        "plt.figure(figsize=(3, 2), dpi=100)\n"
        "plt.bar(['a', 'b'], [3, 5])\n"
        "plt.show()\n")


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def client(isolad):
    return isola.Client(socket_path=isolad.socket, timeout=RUN_TIMEOUT)


@pytest.fixture
def sb(client, isolad):
    s = client.create_sandbox(labels={"suite": "code"})
    yield s
    if isolad.alive():
        try:
            s.delete()
        except isola.NotFoundError:
            pass


def test_state_streams_rich_results_and_errors(sb):
    out, results = [], []
    ex = sb.run_code("import sys\nx = 6\nprint('hi')\nprint('warn', file=sys.stderr)\nx * 7",
                     on_stdout=out.append, on_result=results.append)
    assert ex.error is None
    assert ex.text == "42"
    assert out == ["hi\n"] and ex.logs.stderr == ["warn\n"]
    assert [r.text for r in results] == ["42"]
    # state persists between calls
    assert sb.run_code("x + 1").text == "7"
    # a rich result: an HTML table from a class with _repr_html_ (no pandas needed)
    ex = sb.run_code("class T:\n    def _repr_html_(self):\n"
                     "        return '<table><tr><td>1</td></tr></table>'\nT()")
    assert ex.results[0].html == "<table><tr><td>1</td></tr></table>"
    # an exception: name, value, traceback; the context lives on
    ex = sb.run_code("raise ValueError('bad thing')")
    assert ex.error.name == "ValueError" and ex.error.value == "bad thing"
    assert "ValueError" in ex.error.traceback
    assert sb.run_code("x").text == "6"
    # a matplotlib figure: a PNG of figsize * dpi
    ex = sb.run_code(PLOT)
    png = [r.png for r in ex.results if r.png]
    assert png, f"no PNG in {[r.formats() for r in ex.results]}"
    assert png_size(base64.b64decode(png[0])) == (300, 200)


def test_contexts_are_isolated_and_typed(sb):
    a = sb.create_code_context()
    b = sb.create_code_context(language="python", cwd="/tmp")
    js = sb.create_code_context(language="js")
    assert (a.language, b.cwd, js.language) == ("python", "/tmp", "javascript")
    sb.run_code("v = 'in a'", context=a)
    assert sb.run_code("v", context=a).text == "in a"
    assert sb.run_code("v", context=b).error.name == "NameError"
    sb.run_code("let n = 41", context=js)
    assert sb.run_code("n + 1", context=js).text == "42"
    ids = {c.id for c in sb.list_code_contexts()}
    assert {a.id, b.id, js.id} <= ids
    sb.restart_code_context(a)
    assert sb.run_code("v", context=a).error.name == "NameError"
    sb.remove_code_context(b)
    assert b.id not in {c.id for c in sb.list_code_contexts()}


def test_wrong_input_is_named(sb):
    with pytest.raises(isola.InvalidError, match="language"):
        sb.run_code("1", language="cobol")
    with pytest.raises(isola.NotFoundError, match="context"):
        sb.run_code("1", context="no-such-context")
    with pytest.raises(isola.NotFoundError):
        sb.remove_code_context("no-such-context")
    with pytest.raises(isola.InvalidError, match="not both"):
        sb.run_code("1", language="python", context="abc")
    with pytest.raises(isola.InvalidError, match="context"):
        sb.run_code("1", context="bad id/..")


def test_template_without_python_is_a_clear_error(client, isolad):
    """A sandbox whose python3 cannot be found (here: PATH points nowhere) gets 424 naming
    the template, the need and the doc; nothing is started."""
    s = client.create_sandbox(env={"PATH": "/nonexistent"})
    try:
        with pytest.raises(isola.DependencyError) as e:
            s.run_code("1")
        msg = str(e.value)
        assert "template `host` has no python3 with jupyter_client" in msg
        assert "docs/code-interpreter.md" in msg
        assert e.value.status == 424
    finally:
        s.delete()


def test_service_restarts_after_being_killed(sb):
    sb.run_code("keep = 1")
    procs = [p for p in sb.processes.list() if p.tag == "isola-interp" and p.running]
    assert len(procs) == 1, "the service runs as a tagged background process"
    sb.processes.signal(procs[0].pid, "KILL")
    # the next call starts it again: a fresh default context, working
    ex = sb.run_code("keep_new = 2\nkeep_new * 21")
    assert ex.text == "42"
    assert sb.run_code("keep").error.name == "NameError"
    running = [p for p in sb.processes.list() if p.tag == "isola-interp" and p.running]
    assert len(running) == 1 and running[0].pid != procs[0].pid


def test_read_only_token_may_not_execute(isolad):
    t = Tenant(isolad)
    try:
        sid = t.client.create_sandbox()["id"]
        ro = t.tcp(t.new_token("read-only"))
        r = ro.request("POST", f"/v1/sandboxes/{sid}/code/execute", json={"code": "1"})
        assert r.status == 403, r
        r = ro.request("POST", f"/v1/sandboxes/{sid}/code/contexts", json={})
        assert r.status == 403, r
        # another tenant's sandbox is not found, as everywhere
        other = isola.Client(socket_path=isolad.socket, timeout=RUN_TIMEOUT)
        with other.create_sandbox() as mine:
            r = t.client.request("POST", f"/v1/sandboxes/{mine.id}/code/execute",
                                 json={"code": "1"})
            assert r.status == 404, r
    finally:
        t.cleanup()


def test_cli_code(cli, sb, tmp_path):
    cp = cli("code", sb.id, "-", input="import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
             "n = 5\nn * 8\n", timeout=RUN_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.decode() == "out\n40\n"
    assert cp.stderr.decode() == "err\n"
    # state from the run before; --out saves the figure and prints its path
    script = tmp_path / "plot.py"
    script.write_text(PLOT)
    out = tmp_path / "out"
    out.mkdir()
    cp = cli("code", "--out", out, sb.id, script, timeout=RUN_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    saved = [Path(l) for l in cp.stdout.decode().split() if l.endswith(".png")]
    assert saved and saved[0].parent == out
    assert png_size(saved[0].read_bytes()) == (300, 200)
    # an error: its traceback on stderr, exit 1
    cp = cli("code", sb.id, "-", input="n / 0\n", timeout=RUN_TIMEOUT)
    assert cp.returncode == 1
    assert "ZeroDivisionError" in cp.stderr.decode()
    # --json: the events
    cp = cli("code", sb.id, "-", input="n\n", json=True, timeout=RUN_TIMEOUT)
    events = [json.loads(l) for l in cp.stdout.decode().splitlines()]
    assert {"type": "result", "text": "5", "is_main_result": True} in events
    # JavaScript by --lang
    cp = cli("code", "--lang", "js", sb.id, "-", input="console.log(6 * 7)\n",
             timeout=RUN_TIMEOUT)
    assert cp.returncode == 0 and cp.stdout.decode() == "42\n", cp.stderr
    # wrong input
    cp = cli("code", "--lang", "cobol", sb.id, "-", input="1\n", timeout=RUN_TIMEOUT)
    assert cp.returncode == 1 and "cobol" in cp.stderr.decode()
    cp = cli("code", "--context", "nope", sb.id, "-", input="1\n", timeout=RUN_TIMEOUT)
    assert cp.returncode == 1 and "context" in cp.stderr.decode()
    cp = cli("code", "--out", tmp_path / "missing", sb.id, "-", input="1\n")
    assert cp.returncode == 2 and "is not a directory" in cp.stderr.decode()
