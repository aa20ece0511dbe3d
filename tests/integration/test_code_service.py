# SPDX-License-Identifier: Apache-2.0
"""The code-interpreter service (share/interp) inside a real sandbox, spoken to in E2B's protocol.

The service's files are copied into a process-tier sandbox with the files API (as isolad does),
started as a background process, and driven from inside the sandbox over its loopback by a
small HTTP client (tests/integration/interp_client.py, copied in too). Every check reads the
NDJSON lines the service streamed: results by MIME field, errors, stdout, charts.
"""

import base64
import json
import re
import struct
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICE = REPO / "share" / "interp"
CLIENT = Path(__file__).resolve().parent / "interp_client.py"
DIR = "/opt/isola-interp"
PY = "/usr/bin/python3"  # the host template's Debian python, which has ipykernel
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Interp:
    def __init__(self, api, sid):
        self.api, self.sid = api, sid

    def call(self, method, path, body=None, mode="call", more=()):
        argv = [PY, f"{DIR}/interp_client.py", mode, method, path]
        if body is not None:
            argv.append(json.dumps(body))
        argv += list(more)
        r = self.api.exec(self.sid, cmd=argv, timeout=280, http_timeout=300)
        assert r.get("exit_code") == 0, f"client {argv}: {r}"
        return json.loads(r["stdout"])

    def run(self, code, **fields):
        """POST /execute; returns the streamed lines (asserting the stream ended normally)."""
        out = self.call("POST", "/execute", dict(fields, code=code))
        assert out["status"] == 200, out
        assert out["content_type"] == "application/x-ndjson", out
        lines = out["lines"]
        assert lines and lines[-1] == {"type": "end_of_execution"}, lines
        return lines


def of(lines, kind):
    return [ln for ln in lines if ln["type"] == kind]


def main_result(lines):
    mains = [ln for ln in of(lines, "result") if ln["is_main_result"]]
    assert len(mains) == 1, lines
    return mains[0]


def stdout(lines):
    return "".join(ln["text"] for ln in of(lines, "stdout"))


def png_size(b64):
    png = base64.b64decode(b64)
    assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
    assert png[12:16] == b"IHDR", png[:32]
    return struct.unpack(">II", png[16:24])


@pytest.fixture(scope="module")
def interp(isolad):
    api = isolad.client()
    # three Python kernels with matplotlib loaded, node and bash: more than the 256 MiB default
    sid = api.create_sandbox(memory="1G")["id"]
    api.sh(sid, f"mkdir -p {DIR}")
    for f in ("server.py", "jskernel.js", "pystartup.py"):
        api.write_file(sid, f"{DIR}/{f}", (SERVICE / f).read_bytes())
    api.write_file(sid, f"{DIR}/interp_client.py", CLIENT.read_bytes())
    # Debian's matplotlib reads its defaults through /usr/share/matplotlib/mpl-data/matplotlibrc,
    # a link to /etc/matplotlibrc: the host template copies that file (images/host.c).
    r = api.exec(sid, cmd=[PY, "-c", "import matplotlib; print(matplotlib.matplotlib_fname())"])
    assert r["exit_code"] == 0 and "matplotlibrc" in r["stdout"], r
    api.start_process(sid, command=f"exec {PY} {DIR}/server.py --port 49999 "
                      f"2>{DIR}/server.log")
    ip = Interp(api, sid)
    deadline = time.monotonic() + 90
    while True:
        out = ip.call("GET", "/health")
        if out["status"] == 200:
            break
        assert time.monotonic() < deadline, f"service did not start: {out}"
        time.sleep(0.3)
    yield ip
    api.delete_sandbox(sid)


def test_python_state_and_main_result(interp):
    lines = interp.run("import math\nx = 40\nprint('hello', flush=True)\nx + 2")
    assert stdout(lines) == "hello\n"
    assert main_result(lines)["text"] == "42"
    assert of(lines, "number_of_executions")[0]["execution_count"] >= 1
    lines = interp.run("x * 2, math.pi > 3", language="python")
    assert main_result(lines)["text"] == "(80, True)"
    # E2B shows a string's main result without its repr quotes
    assert main_result(interp.run("'abc'"))["text"] == "abc"
    # env_vars hold for that execution only; the context's own values come back after it
    interp.run("import os\nos.environ['MINE'] = 'kept'")
    lines = interp.run("os.environ.get('ONLY_NOW'), os.environ['MINE']",
                       env_vars={"ONLY_NOW": "v 1", "MINE": "replaced"})
    assert main_result(lines)["text"] == "('v 1', 'replaced')"
    lines = interp.run("str(os.environ.get('ONLY_NOW')), os.environ['MINE']")
    assert main_result(lines)["text"] == "('None', 'kept')"


def test_matplotlib_png_has_figure_size(interp):
    lines = interp.run("import matplotlib.pyplot as plt\n"
                       "fig = plt.figure(figsize=(4, 3), dpi=50)\n"
                       "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
    pngs = [ln for ln in of(lines, "result") if "png" in ln]
    assert len(pngs) == 1, lines
    assert png_size(pngs[0]["png"]) == (200, 150)
    assert pngs[0]["is_main_result"] is False


def test_html_table_from_repr_html(interp):
    lines = interp.run(
        "class Table:\n"
        "    def __init__(self, rows): self.rows = rows\n"
        "    def _repr_html_(self):\n"
        "        body = ''.join(f'<tr><td>{a}</td><td>{b}</td></tr>' for a, b in self.rows)\n"
        "        return f'<table>{body}</table>'\n"
        "    def _repr_markdown_(self): return '| a | b |'\n"
        "    def __repr__(self): return f'Table({len(self.rows)} rows)'\n"
        "from IPython.display import display, JSON\n"
        "display(JSON({'k': [1, 2]}))\n"
        "Table([(1, 'one'), (2, 'two')])")
    res = main_result(lines)
    assert res["html"] == "<table><tr><td>1</td><td>one</td></tr><tr><td>2</td><td>two</td></tr></table>"
    assert res["markdown"] == "| a | b |"
    assert res["text"] == "Table(2 rows)"
    shown = [ln for ln in of(lines, "result") if not ln["is_main_result"]]
    assert [s.get("json") for s in shown] == [{"k": [1, 2]}], lines
    lines = interp.run(
        "class Formula:\n"
        "    def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
        "    def _repr_latex_(self): return r'$\\alpha^2$'\n"
        "    def _repr_json_(self): return {'n': 1}\n"
        "display(Formula())")
    (shown,) = of(lines, "result")
    assert shown["svg"] == '<svg xmlns="http://www.w3.org/2000/svg"/>'
    assert (shown["latex"], shown["json"], shown["is_main_result"]) == (r"$\alpha^2$", {"n": 1}, False)


def test_exception_has_name_value_traceback(interp):
    lines = interp.run("def inner():\n    raise ValueError('bad thing 7')\n\ninner()")
    errs = of(lines, "error")
    assert len(errs) == 1, lines
    e = errs[0]
    assert (e["name"], e["value"]) == ("ValueError", "bad thing 7")
    tb = ANSI.sub("", e["traceback"])
    assert "inner()" in tb and "raise ValueError('bad thing 7')" in tb, tb
    assert "ValueError: bad thing 7" in tb, tb
    assert not of(lines, "result")


def test_interrupt_keeps_the_context(interp):
    interp.run("kept = 'still here'")
    # E2B's client cancels by closing the connection: the service interrupts the kernel.
    out = interp.call("POST", "/execute", {"code": "while True: pass"}, mode="abandon")
    assert out["abandoned"], out
    lines = interp.run("kept")
    assert main_result(lines)["text"] == "still here"
    # isola's own `timeout` (seconds) interrupts as well and says so in the stream.
    lines = interp.run("n = 0\nwhile True: n += 1", timeout=2)
    assert [e["name"] for e in of(lines, "error")] == ["KeyboardInterrupt"], lines
    assert "timed out" in "".join(ln["text"] for ln in of(lines, "stderr"))
    lines = interp.run("kept, n > 0")
    assert main_result(lines)["text"] == "('still here', True)"


def test_contexts_are_isolated_and_managed(interp):
    a = interp.call("POST", "/contexts", {"language": "python", "cwd": "/tmp"})
    b = interp.call("POST", "/contexts", {"language": "python"})
    assert a["status"] == b["status"] == 200, (a, b)
    ca, cb = json.loads(a["body"]), json.loads(b["body"])
    assert ca["language"] == "python" and ca["cwd"] == "/tmp" and ca["id"] != cb["id"]
    interp.run("v = 'A'", context_id=ca["id"])
    interp.run("v = 'B'", context_id=cb["id"])
    assert main_result(interp.run("v", context_id=ca["id"]))["text"] == "A"
    assert main_result(interp.run("v", context_id=cb["id"]))["text"] == "B"
    assert main_result(interp.run("import os; os.getcwd()", context_id=ca["id"]))["text"] == "/tmp"
    # the default context has no `v`
    assert of(interp.run("v"), "error")[0]["name"] == "NameError"
    listed = json.loads(interp.call("GET", "/contexts")["body"])
    assert {ca["id"], cb["id"]} <= {c["id"] for c in listed}
    assert interp.call("POST", f"/contexts/{ca['id']}/restart")["status"] == 200
    assert of(interp.run("v", context_id=ca["id"]), "error")[0]["name"] == "NameError"
    assert interp.call("DELETE", f"/contexts/{cb['id']}")["status"] == 200
    gone = interp.call("POST", "/execute", {"code": "v", "context_id": cb["id"]})
    assert (gone["status"], gone["body"]) == (404, f"Context {cb['id']} not found")
    assert cb["id"] not in {c["id"] for c in json.loads(interp.call("GET", "/contexts")["body"])}


def test_executions_queue_per_context_and_contexts_run_independently(interp):
    other = json.loads(interp.call("POST", "/contexts", {"language": "python"})["body"])["id"]
    # The first waits (up to its timeout) for a file that only the second creates: the second,
    # in another context, must run while the first is still running.
    first = {"code": "import os, time\nopen('/tmp/indep-running', 'w').close()\n"
             "while not os.path.exists('/tmp/indep-done'): time.sleep(0.05)\n'first done'",
             "timeout": 120}
    second = {"code": "open('/tmp/indep-done', 'w').close()\n'second done'",
              "context_id": other}
    a, b = interp.call("POST", "/execute", first, mode="pair",
                       more=["/tmp/indep-running", json.dumps(second)])
    assert main_result(b["lines"])["text"] == "second done", b
    assert not of(a["lines"], "error") and main_result(a["lines"])["text"] == "first done", a
    # In one context a second execution waits for the first (no 409 busy), then sees its state.
    first = {"code": "import time\nopen('/tmp/queue-running', 'w').close()\ntime.sleep(1)\n"
             "queued = 'set by the first'", "language": "python"}
    second = {"code": "queued", "language": "python"}
    a, b = interp.call("POST", "/execute", first, mode="pair",
                       more=["/tmp/queue-running", json.dumps(second)])
    assert a["status"] == b["status"] == 200, (a, b)
    assert main_result(b["lines"])["text"] == "set by the first", b
    assert interp.call("DELETE", f"/contexts/{other}")["status"] == 200


def test_javascript_context(interp):
    lines = interp.run("let total = 40;\nconsole.log('from js', 1 + 1);\ntotal + 2",
                       language="javascript")
    assert stdout(lines) == "from js 2\n"
    assert main_result(lines)["text"] == "42"
    lines = interp.run("total += 1;\nconst later = await Promise.resolve(total * 2);\nlater",
                       language="js")
    assert main_result(lines)["text"] == "82"
    assert main_result(interp.run("[later, typeof require('fs').readFileSync]",
                                  language="javascript"))["text"] == "[ 82, 'function' ]"
    lines = interp.run("function boom() { throw new RangeError('too far'); }\nboom()",
                       language="javascript")
    e = of(lines, "error")[0]
    assert (e["name"], e["value"]) == ("RangeError", "too far")
    assert "boom" in e["traceback"] and "jskernel" not in e["traceback"], e
    lines = interp.run("while (true) {}", language="javascript", timeout=2)
    assert of(lines, "error"), lines
    assert main_result(interp.run("total", language="javascript"))["text"] == "41"
    lines = interp.run("process.env.ONLY_NOW", language="javascript", env_vars={"ONLY_NOW": "js"})
    assert main_result(lines)["text"] == "js"
    assert main_result(interp.run("String(process.env.ONLY_NOW)",
                                  language="javascript"))["text"] == "undefined"


def test_typescript_context(interp):
    """TypeScript through node's type stripping or, on node < 22.13 (this machine's 20),
    Debian's node-typescript compiler: types, interfaces and enums, state across calls."""
    ctx = interp.call("POST", "/contexts", {"language": "typescript"})
    assert ctx["status"] == 200, ctx
    cid = json.loads(ctx["body"])["id"]
    code = ("interface Point { x: number; y: number }\n"
            "enum Axis { X = 1, Y = 2 }\n"
            "const norm1 = (p: Point): number => Math.abs(p.x) + Math.abs(p.y);\n"
            "let seen: Point[] = [{x: 3, y: -4}];\n"
            "norm1(seen[0]) * Axis.Y")
    assert main_result(interp.run(code, context_id=cid))["text"] == "14"
    lines = interp.run("seen.push({x: 1, y: 1} as Point);\nconst n: number = seen.length;\nn",
                       context_id=cid)
    assert main_result(lines)["text"] == "2", lines
    e = of(interp.run("const bad = (s: string): never => { throw new TypeError(s) };\nbad('no')",
                      context_id=cid), "error")[0]
    assert (e["name"], e["value"]) == ("TypeError", "no"), e
    # the alias `ts` names the same language
    assert main_result(interp.run("const t: string = 'ok';\nt", language="ts"))["text"] == "ok"


def test_bash_context(interp):
    lines = interp.run("GREETING=hi\ncd /tmp\necho \"$GREETING\"; echo oops >&2", language="bash")
    assert stdout(lines) == "hi\n"
    assert "".join(ln["text"] for ln in of(lines, "stderr")) == "oops\n"
    assert not of(lines, "error")
    lines = interp.run("echo \"$GREETING from $(pwd) $EXTRA\"", language="bash",
                       env_vars={"EXTRA": "x y"})
    assert stdout(lines) == "hi from /tmp x y\n"
    assert stdout(interp.run("echo \"[${EXTRA-unset}]\"", language="bash")) == "[unset]\n"
    lines = interp.run("false", language="bash")
    assert of(lines, "error") == [{"type": "error", "name": "", "value": "1", "traceback": ""}]
    lines = interp.run("while true; do :; done", language="bash", timeout=2)
    assert of(lines, "error")[0]["value"] == "130", lines
    assert stdout(interp.run("echo $GREETING", language="bash")) == "hi\n"
    # an interpreter that exits is reported, and the next execution gets a fresh one
    lines = interp.run("exit 3", language="bash")
    (err,) = of(lines, "error")
    assert err["name"] == "ContextDied" and "exited (status 3)" in err["value"], err
    lines = interp.run("echo \"[$GREETING]\"", language="bash")
    assert stdout(lines) == "[]\n" and not of(lines, "error"), lines
    assert of(lines, "number_of_executions")[0]["execution_count"] == 1


def test_charts_from_line_and_bar_plots(interp):
    lines = interp.run("import matplotlib.pyplot as plt\n"
                       "plt.figure()\n"
                       "plt.plot([1, 2, 3], [2, 4, 8], label='growth')\n"
                       "plt.title('Line'); plt.xlabel('day'); plt.ylabel('count')\n"
                       "plt.show()")
    chart = [ln for ln in of(lines, "result") if "chart" in ln][0]["chart"]
    assert chart["type"] == "line" and chart["title"] == "Line", chart
    assert (chart["x_label"], chart["y_label"]) == ("day", "count")
    assert chart["x_scale"] == "linear" and chart["x_ticks"] and chart["x_tick_labels"]
    assert chart["elements"] == [{"label": "growth", "points": [[1, 2], [2, 4], [3, 8]]}]
    lines = interp.run("plt.figure()\n"
                       "plt.bar(['red', 'green', 'blue'], [3, 5, 1], label='paint')\n"
                       "plt.title('Bars')\nplt.show()")
    chart = [ln for ln in of(lines, "result") if "chart" in ln][0]["chart"]
    assert chart["type"] == "bar" and chart["title"] == "Bars", chart
    assert chart["elements"] == [{"label": "red", "value": 3, "group": "paint"},
                                 {"label": "green", "value": 5, "group": "paint"},
                                 {"label": "blue", "value": 1, "group": "paint"}]


def test_bad_input_is_named(interp):
    r = interp.call("POST", "/execute", {"code": "1", "language": "cobol"})
    assert r["status"] == 400 and "cobol" in r["body"], r
    r = interp.call("POST", "/execute", {"code": "1", "context_id": "no-such"})
    assert (r["status"], r["body"]) == (404, "Context no-such not found")
    r = interp.call("POST", "/execute", {"code": "1", "context_id": "x", "language": "python"})
    assert r["status"] == 400 and "context_id" in r["body"], r
    r = interp.call("POST", "/execute", {"language": "python"})
    assert r["status"] == 400 and "'code'" in r["body"], r
    r = interp.call("POST", "/execute", {"code": "1", "env_vars": {"BAD-NAME": "v"}})
    assert r["status"] == 400 and "BAD-NAME" in r["body"], r
    r = interp.call("POST", "/contexts", {"language": "python", "cwd": "/no/such/dir"})
    assert r["status"] == 400 and "/no/such/dir" in r["body"], r
    r = interp.call("DELETE", "/contexts/no-such")
    assert (r["status"], r["body"]) == (404, "Context no-such not found")
    # nothing was lost: the default context still answers
    assert main_result(interp.run("1 + 1"))["text"] == "2"
