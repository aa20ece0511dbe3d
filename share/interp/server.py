#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""isola's code-interpreter service: E2B's port-49999 HTTP protocol over live Python, JS and bash contexts.

Runs inside a sandbox. Python contexts are ipykernel kernels driven through jupyter_client,
JavaScript contexts are share/interp/jskernel.js (one node process each), bash contexts are one
persistent bash each. docs/code-interpreter.md is the design note and the wire format.
Standard library + Debian's python3-jupyter-client/python3-ipykernel only (the latter two are
imported when the first Python context starts, so JS and bash work without them).
"""

import argparse
import datetime
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_BODY = 16 << 20
POLL = 0.2  # seconds between checks for a gone client or a passed deadline
INTERRUPT_GRACE = 20.0  # seconds an interrupted execution gets to stop before its context restarts
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ALIASES = {"py": "python", "python3": "python", "js": "javascript", "node": "javascript",
           "ts": "typescript", "sh": "bash", "shell": "bash"}


def log(msg):
    print(f"isola-interp: {msg}", file=sys.stderr, flush=True)


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class BadRequest(Exception):
    """A request the service refuses; .status is the HTTP status, str() the plain-text body."""

    def __init__(self, status, msg):
        super().__init__(msg)
        self.status = status


def unquoted(text):
    # E2B's server shows a string's text/plain without the quotes of its repr.
    if isinstance(text, str) and len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        return text[1:-1]
    return text


MIME_FIELDS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown",
    "image/svg+xml": "svg", "image/png": "png", "image/jpeg": "jpeg",
    "application/pdf": "pdf", "text/latex": "latex", "application/json": "json",
    "application/javascript": "javascript", "e2b/data": "data", "e2b/chart": "chart",
}


def result_from_mime(data, is_main):
    """One E2B `result` line from a Jupyter MIME bundle; unknown MIME types go to `extra`."""
    out = {"type": "result"}
    extra = {}
    for mime, value in data.items():
        field = MIME_FIELDS.get(mime)
        if field is None:
            extra[mime] = value
        else:
            out[field] = value
    if "text" in out:
        out["text"] = unquoted(out["text"])
    if extra:
        out["extra"] = extra
    out["is_main_result"] = is_main
    return out


class Stream:
    """The NDJSON answer of one /execute, chunk-encoded; notices a client that went away.

    emit() never raises: after a failed write (or once gone() saw the peer close) it drops lines.
    """

    def __init__(self, handler):
        self.h = handler
        self.closed = False

    def emit(self, obj):
        if self.closed:
            return
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        try:
            self.h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.h.wfile.flush()
        except OSError:
            self.closed = True

    def finish(self):
        if not self.closed:
            try:
                self.h.wfile.write(b"0\r\n\r\n")
                self.h.wfile.flush()
            except OSError:
                self.closed = True

    def gone(self):
        """True once the client closed its end (its way of cancelling, as E2B's SDK does)."""
        if self.closed:
            return True
        sock = self.h.connection
        try:
            r, _, _ = select.select([sock], [], [], 0)
            if r and sock.recv(1, socket.MSG_PEEK) == b"":
                self.closed = True
        except OSError:
            self.closed = True
        return self.closed


class Context:
    """One live interpreter. Executions are serialised by self.lock (a second one waits, as in E2B).

    Subclasses implement _start(), _stop(), _interrupt() and _run(code, env, run) where `run` is an
    Execution; a context that died is restarted by the next execution.
    """

    language = "?"

    def __init__(self, cwd):
        self.id = str(uuid.uuid4())
        self.cwd = cwd
        self.lock = threading.Lock()
        self.count = 0
        self.dead = False

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def start(self):
        self._start()

    def _quiesce(self):
        # A running execution is interrupted first; it ends (or its context is restarted by
        # Execution.check) within INTERRUPT_GRACE, then the lock is ours.
        if not self.lock.acquire(blocking=False):
            self._interrupt()
            self.lock.acquire()

    def restart(self):
        self._quiesce()
        try:
            self._stop()
            self.count = 0
            self._start()
            self.dead = False
        finally:
            self.lock.release()

    def shutdown(self):
        self._quiesce()
        try:
            self._stop()
        finally:
            self.lock.release()

    def execute(self, code, env, stream, timeout):
        with self.lock:
            if stream.gone():  # cancelled while it waited for the execution before it
                return
            if self.dead:
                self._stop()
                self.count = 0
                self._start()
                self.dead = False
            run = Execution(self, stream, timeout)
            self._run(code, env, run)
            stream.emit({"type": "end_of_execution"})

    def died(self, run, what):
        self.dead = True
        run.stream.emit({"type": "error", "name": "ContextDied", "value":
                         f"the {self.language} context {self.id} {what}; its state is lost and "
                         "the next execution starts it afresh", "traceback": ""})


class Execution:
    """Deadline and cancellation bookkeeping of one execution."""

    def __init__(self, ctx, stream, timeout):
        self.ctx = ctx
        self.stream = stream
        self.deadline = None if not timeout else _mono() + timeout
        self.interrupted_at = None

    def check(self):
        """Interrupts the context once the client is gone or the deadline passed; returns False
        when the interrupt did not stop the execution within INTERRUPT_GRACE (caller gives up)."""
        if self.interrupted_at is None:
            late = self.deadline is not None and _mono() >= self.deadline
            if late or self.stream.gone():
                self.interrupted_at = _mono()
                if late:
                    self.stream.emit({"type": "stderr", "text": "isola: execution timed out, "
                                      "interrupting\n", "timestamp": now()})
                self.ctx._interrupt()
            return True
        return _mono() - self.interrupted_at < INTERRUPT_GRACE


def _mono():
    return time.monotonic()


class PythonContext(Context):
    language = "python"

    def _start(self):
        try:
            from jupyter_client.manager import KernelManager
        except ImportError as e:
            raise BadRequest(500, f"python contexts need python3-jupyter-client and "
                             f"python3-ipykernel for {sys.executable}: {e}") from None
        env = dict(os.environ)
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=self.cwd, env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=120)
        except RuntimeError as e:
            self._stop()
            raise BadRequest(500, f"python kernel did not start: {e}") from None
        with open(os.path.join(HERE, "pystartup.py")) as f:
            self._silent(f.read())

    def _stop(self):
        kc, km = getattr(self, "kc", None), getattr(self, "km", None)
        self.kc = self.km = None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception as e:  # noqa: BLE001 - a dead kernel is already down
                log(f"python kernel shutdown: {e}")

    def _interrupt(self):
        if self.km is not None:
            self.km.interrupt_kernel()

    def _silent(self, code, timeout=60):
        msg_id = self.kc.execute(code, silent=True, store_history=False, stop_on_error=False)
        self._reply(msg_id, timeout)

    def _reply(self, msg_id, timeout):
        deadline = _mono() + timeout
        while _mono() < deadline:
            try:
                msg = self.kc.get_shell_msg(timeout=POLL)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
        return None

    def _run(self, code, env, run):
        if env:  # set for this execution; the kernel's own previous values are restored after
            self._silent("import os as __o\n__isola_env__ = {k: __o.environ.get(k) for k in %r}\n"
                         "__o.environ.update(%r)\ndel __o" % (list(env), env))
        # stop_on_error=False: an execution that fails (an interrupt included) must not make
        # the kernel abort the next one. With the default, ipykernel sends the failed one's
        # reply, then aborts whatever execute_request reaches it before its abort window
        # closes: the next execution, sent as soon as that reply came, ended with no input and
        # no result under load (test_code_service.py test_interrupt_keeps_the_context, CI).
        msg_id = self.kc.execute(code, store_history=True, allow_stdin=False,
                                 stop_on_error=False)
        emit = run.stream.emit
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=POLL)
            except queue.Empty:
                if not self.km.is_alive():
                    return self.died(run, "exited")
                if not run.check():
                    self.km.restart_kernel(now=True)
                    return self.died(run, "did not stop on an interrupt and was restarted")
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            t, c = msg["msg_type"], msg["content"]
            date = msg["header"].get("date")
            ts = date.isoformat() if hasattr(date, "isoformat") else str(date or now())
            if t == "execute_input":
                self.count = c.get("execution_count", self.count + 1)
                emit({"type": "number_of_executions", "execution_count": self.count})
            elif t == "stream":
                kind = "stderr" if c.get("name") == "stderr" else "stdout"
                emit({"type": kind, "text": c.get("text", ""), "timestamp": ts})
            elif t in ("display_data", "execute_result"):
                emit(result_from_mime(c.get("data", {}), t == "execute_result"))
            elif t == "error":
                emit({"type": "error", "name": c.get("ename", ""), "value": c.get("evalue", ""),
                      "traceback": "\n".join(c.get("traceback", []))})
            elif t == "status" and c.get("execution_state") == "idle":
                break
            run.check()
        self._reply(msg_id, 10)
        if env:
            self._silent("import os as __o\nfor __k, __v in __isola_env__.items():\n"
                         "    __o.environ.pop(__k, None) if __v is None else "
                         "__o.environ.__setitem__(__k, __v)\ndel __o, __k, __v, __isola_env__")


class PipeContext(Context):
    """A context backed by one child process whose output reader threads feed self.q."""

    def _spawn(self, argv, extra_fds=()):
        self.q = queue.Queue()
        self.proc = subprocess.Popen(argv, cwd=self.cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, pass_fds=extra_fds)
        for name, f in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(name, f, self.q), daemon=True).start()

    @staticmethod
    def _pump(name, f, q):
        while True:
            chunk = os.read(f.fileno(), 65536)
            if not chunk:
                q.put((name, None))
                return
            q.put((name, chunk.decode("utf-8", "replace")))

    def _stop(self):
        p = getattr(self, "proc", None)
        self.proc = None
        if p is None:
            return
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                f.close()

    def _interrupt(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
        except OSError:
            pass

    def _send(self, text):
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
            return True
        except OSError:
            return False


# jskernel.js's stripTypes: node's own type stripping, else a TypeScript compiler it can load.
TS_PROBE = ("typeof require('module').stripTypeScriptTypes === 'function' || "
            "['typescript', '/usr/share/nodejs/typescript'].some(p => "
            "{ try { require.resolve(p); return true } catch (_) { return false } })")


def node_can_strip_types(node):
    r = subprocess.run([node, "-p", TS_PROBE], capture_output=True, text=True)
    return r.stdout.strip() == "true"


class NodeContext(PipeContext):
    """share/interp/jskernel.js: requests on its stdin, E2B-shaped lines on its fd 3."""

    language = "javascript"
    typescript = False

    def _start(self):
        node = shutil.which("node")
        if node is None:
            raise BadRequest(400, f"language '{self.language}' needs node on PATH, which "
                             "this sandbox lacks")
        if self.typescript and not node_can_strip_types(node):
            v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
            raise BadRequest(400, f"language 'typescript' is not supported here: node {v} "
                             "cannot strip types (node >= 22.13) and no TypeScript compiler "
                             "is installed (Debian: node-typescript)")
        r, w = os.pipe()
        try:
            self._spawn([node, "--expose-internals", os.path.join(HERE, "jskernel.js")], (w,))
            self.proc.stdin.write(b"%d\n" % w)
            self.proc.stdin.flush()
        finally:
            os.close(w)
        threading.Thread(target=self._proto, args=(r, self.q), daemon=True).start()

    @staticmethod
    def _proto(fd, q):
        with os.fdopen(fd, "rb") as f:
            for line in f:
                try:
                    q.put(("proto", json.loads(line)))
                except ValueError:
                    q.put(("stderr", line.decode("utf-8", "replace")))
        q.put(("proto", None))

    def _run(self, code, env, run):
        req = {"code": code, "env": env or {}, "ts": self.typescript}
        if not self._send(json.dumps(req) + "\n"):
            return self.died(run, "exited")
        emit = run.stream.emit
        while True:
            try:
                kind, item = self.q.get(timeout=POLL)
            except queue.Empty:
                if not run.check():
                    self._stop()
                    self.dead = True
                    return self.died(run, "did not stop on an interrupt and was restarted")
                continue
            if item is None:
                if kind == "proto":
                    return self.died(run, f"exited (status {self.proc.wait()})")
                continue
            if kind != "proto":
                emit({"type": kind, "text": item, "timestamp": now()})
                continue
            if item.get("type") == "done":
                return
            if item.get("type") == "number_of_executions":
                self.count = item["execution_count"]
            if item.get("type") in ("stdout", "stderr"):
                item["timestamp"] = now()
            if item.get("type") == "result" and item.get("is_main_result"):
                item["text"] = unquoted(item.get("text"))
            emit(item)
            run.check()


class TypeScriptContext(NodeContext):
    language = "typescript"
    typescript = True


class BashContext(PipeContext):
    """One persistent bash; each cell is sourced from a file and ends with a marker per stream.

    A non-zero status of the cell's last command is an error named "" whose value is the status,
    as Jupyter's bash_kernel (E2B's bash) reports it. SIGINT makes the sourced cell return 130.
    """

    language = "bash"

    def _start(self):
        self.dir = tempfile.mkdtemp(prefix="isola-interp-bash-")
        self._spawn(["bash", "--noprofile", "--norc"])
        self.eof = set()

    def _run(self, code, env, run):
        self.count += 1
        mark = "__isola_end_%s__" % uuid.uuid4().hex
        cell = os.path.join(self.dir, "cell-%d.sh" % self.count)
        with open(cell, "w") as f:
            f.write(code)
            if not code.endswith("\n"):
                f.write("\n")
        names = " ".join(env or {})
        lines = ["trap 'return 130 2>/dev/null' INT"]
        if env:
            lines.append(f"__isola_saved=$(declare -p {names} 2>/dev/null)")
            lines.append("export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
        lines.append(f". {shlex.quote(cell)} </dev/null")
        lines.append("__isola_rc=$?")
        if env:
            lines.append(f"unset {names}; eval \"$__isola_saved\"; unset __isola_saved")
        lines.append(f"rm -f {shlex.quote(cell)}")
        lines.append(f"printf '%s %d\\n' {mark} $__isola_rc; printf '%s\\n' {mark} >&2")
        run.stream.emit({"type": "number_of_executions", "execution_count": self.count})
        if not self._send("\n".join(lines) + "\n"):
            return self.died(run, "exited")
        pending = {"stdout": "", "stderr": ""}
        done = {}
        while len(done) < 2:
            try:
                kind, item = self.q.get(timeout=POLL)
            except queue.Empty:
                if not run.check():
                    self._stop()
                    return self.died(run, "did not stop on an interrupt and was restarted")
                continue
            if item is None:
                return self.died(run, f"exited (status {self.proc.wait()})")
            buf = pending[kind] + item
            at = buf.find(mark)
            if at >= 0:
                out, rest = buf[:at], buf[at + len(mark):]
                done[kind] = rest.strip()
                pending[kind] = ""
            else:
                # hold back only a tail that may be the start of the marker
                keep = next((n for n in range(min(len(mark) - 1, len(buf)), 0, -1)
                             if mark.startswith(buf[-n:])), 0)
                out, pending[kind] = buf[:len(buf) - keep], buf[len(buf) - keep:]
            if out:
                run.stream.emit({"type": kind, "text": out, "timestamp": now()})
            run.check()
        rc = done["stdout"]
        if rc != "0":
            run.stream.emit({"type": "error", "name": "", "value": rc, "traceback": ""})

    def _stop(self):
        super()._stop()
        d = getattr(self, "dir", None)
        if d:
            shutil.rmtree(d, ignore_errors=True)


KINDS = {"python": PythonContext, "javascript": NodeContext, "typescript": TypeScriptContext,
         "bash": BashContext}


class Registry:
    """Every context by id, and the default context of each language (created on first use)."""

    def __init__(self, cwd):
        self.cwd = cwd
        self.lock = threading.Lock()
        self.contexts = {}
        self.defaults = {}
        self.default_locks = {lang: threading.Lock() for lang in KINDS}

    @staticmethod
    def language(name):
        if name is None:
            return "python"
        if not isinstance(name, str):
            raise BadRequest(400, "field 'language' must be a string")
        lang = ALIASES.get(name.strip().lower(), name.strip().lower())
        if lang not in KINDS:
            raise BadRequest(400, f"unsupported language '{name}' (supported: "
                             f"{', '.join(KINDS)})")
        return lang

    def create(self, language, cwd=None):
        lang = self.language(language)
        cwd = self.cwd if cwd is None else cwd
        if not isinstance(cwd, str) or not os.path.isdir(cwd):
            raise BadRequest(400, f"cwd '{cwd}' is not a directory in the sandbox")
        ctx = KINDS[lang](cwd)
        ctx.start()
        with self.lock:
            self.contexts[ctx.id] = ctx
        log(f"context {ctx.id} ({lang}) started in {cwd}")
        return ctx

    def default(self, language):
        lang = self.language(language)
        with self.default_locks[lang]:
            with self.lock:
                ctx = self.contexts.get(self.defaults.get(lang))
            if ctx is None:
                ctx = self.create(lang)
                with self.lock:
                    self.defaults[lang] = ctx.id
            return ctx

    def get(self, cid):
        with self.lock:
            ctx = self.contexts.get(cid)
        if ctx is None:
            raise BadRequest(404, f"Context {cid} not found")
        return ctx

    def remove(self, cid):
        with self.lock:
            ctx = self.contexts.pop(cid, None)
            for lang, d in list(self.defaults.items()):
                if d == cid:
                    del self.defaults[lang]
        if ctx is None:
            raise BadRequest(404, f"Context {cid} not found")
        ctx.shutdown()

    def list(self):
        with self.lock:
            return [c.describe() for c in self.contexts.values()]

    def shutdown(self):
        with self.lock:
            ctxs = list(self.contexts.values())
            self.contexts.clear()
        for c in ctxs:
            c.shutdown()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "isola-interp/1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            log(fmt % args)

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def reply(self, status, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        # Every request's body is read, used or not, so the connection can carry the next one.
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise BadRequest(411, "a chunked request body is not supported: send Content-Length")
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest(400, "Content-Length is not a number") from None
        if n > MAX_BODY:
            raise BadRequest(413, f"request body of {n} bytes is over the {MAX_BODY} byte limit")
        self.raw = self.rfile.read(n) if n > 0 else b""

    def body(self):
        raw = self.raw
        if not raw.strip():
            return {}
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise BadRequest(400, f"request body is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise BadRequest(400, "request body must be a JSON object")
        return obj

    def route(self, method):
        path = urlsplit(self.path).path.rstrip("/") or "/"
        reg = self.server.registry
        try:
            self.read_body()
            parts = path.strip("/").split("/")
            if method == "GET" and path == "/health":
                return self.reply(200, '"OK"')
            if path == "/execute" and method == "POST":
                return self.execute(self.body())
            if path == "/contexts" and method == "GET":
                return self.reply(200, json.dumps(reg.list()))
            if path == "/contexts" and method == "POST":
                req = self.body()
                return self.reply(200, json.dumps(reg.create(req.get("language"),
                                                             req.get("cwd")).describe()))
            if len(parts) == 2 and parts[0] == "contexts" and method == "DELETE":
                reg.remove(parts[1])
                return self.reply(200, "null")
            if len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart" \
                    and method == "POST":
                reg.get(parts[1]).restart()
                return self.reply(200, "null")
            raise BadRequest(404, f"no route {method} {path}")
        except BadRequest as e:
            self.fail(e.status, str(e))
        except Exception as e:  # noqa: BLE001 - the client gets the reason, the service lives on
            log(f"{method} {path}: {type(e).__name__}: {e}")
            self.fail(500, f"{type(e).__name__}: {e}")

    def fail(self, status, text):
        # The request's body may be unread: the connection cannot carry another request.
        self.close_connection = True
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def execute(self, req):
        code = req.get("code")
        if not isinstance(code, str):
            raise BadRequest(400, "field 'code' must be a string")
        cid, lang = req.get("context_id"), req.get("language")
        if cid and lang:
            raise BadRequest(400, "Only one of context_id or language can be provided")
        env = req.get("env_vars") or {}
        if not isinstance(env, dict):
            raise BadRequest(400, "field 'env_vars' must be an object of strings")
        for k, v in env.items():
            if not ENV_NAME.match(k) or not isinstance(v, str):
                raise BadRequest(400, f"env_vars entry '{k}' must be a variable name with a "
                                 "string value")
        timeout = req.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or timeout <= 0):
            raise BadRequest(400, "field 'timeout' must be a positive number of seconds")
        reg = self.server.registry
        ctx = reg.get(cid) if cid else reg.default(lang)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stream = Stream(self)
        try:
            ctx.execute(code, env, stream, timeout)
        except Exception as e:  # noqa: BLE001 - headers are out: say it in the stream
            log(f"execute in {ctx.id}: {type(e).__name__}: {e}")
            stream.emit({"type": "error", "name": type(e).__name__, "value": str(e),
                         "traceback": ""})
            stream.emit({"type": "unexpected_end_of_execution"})
        stream.finish()
        if stream.closed:
            self.close_connection = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=49999, help="port (default 49999, E2B's)")
    ap.add_argument("--cwd", default=None, help="default working directory of new contexts "
                    "(default $HOME when it exists, else /)")
    ap.add_argument("--no-prewarm", action="store_true",
                    help="do not start the default Python context at startup")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = ap.parse_args()
    cwd = a.cwd or (os.environ.get("HOME") if os.path.isdir(os.environ.get("HOME") or "") else "/")
    if not os.path.isdir(cwd):
        ap.error(f"--cwd '{cwd}' is not a directory")
    try:
        srv = ThreadingHTTPServer((a.host, a.port), Handler)
    except OSError as e:
        print(f"isola-interp: listen on {a.host}:{a.port}: {e.strerror}", file=sys.stderr)
        return 1
    srv.daemon_threads = True
    # Kernels' connection files: a private directory, whether or not $HOME is writable.
    runtime = None
    if "JUPYTER_RUNTIME_DIR" not in os.environ:
        runtime = os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="isola-interp-jupyter-")
    srv.registry = Registry(cwd)
    srv.verbose = a.verbose
    # A service started in the background of a shell inherits SIGINT ignored, and so would every
    # context (bash cannot even trap a signal ignored on entry): interrupts need it default.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    if not a.no_prewarm:
        def prewarm():
            try:
                srv.registry.default("python")
            except Exception as e:  # noqa: BLE001 - a template without ipykernel still serves JS/bash
                log(f"prewarm of the python context failed: {e}")
        threading.Thread(target=prewarm, daemon=True).start()
    print(f"isola-interp: listening on {a.host}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        srv.registry.shutdown()
        srv.server_close()
        if runtime:
            shutil.rmtree(runtime, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
