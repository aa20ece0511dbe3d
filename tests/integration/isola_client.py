# SPDX-License-Identifier: Apache-2.0
"""Stdlib-only clients for driving a real isolad from the integration tests.

- Client: HTTP/1.1 over isolad's unix socket (or TCP with a bearer token), JSON helpers.
- EventStream: NDJSON and SSE readers where every read is bounded by a timeout, so a server
  that buffers or hangs makes the test fail instead of blocking CI.
- WebSocket: a minimal RFC 6455 client (masked client frames, ping/pong, close).
- Host-side probes (procfs, cgroupfs, mountinfo) used to judge boundaries from the host.

No mocks of isola's own parts live here: every call goes to the real daemon.
"""

import base64
import glob
import hashlib
import http.client
import json as jsonlib
import os
import re
import socket
import struct
import time
import urllib.parse

# State dirs the tests/conftest.py Isolad made in this pytest session (its sessionfinish
# removes these and only these: a concurrent session's /tmp/isola-it-* dirs look the same).
MADE_STATE_DIRS = []

DEFAULT_TIMEOUT = 30.0


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket."""

    def __init__(self, path, timeout=DEFAULT_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Response:
    """A fully read HTTP response."""

    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        try:
            return jsonlib.loads(self.body)
        except ValueError as e:
            raise AssertionError(
                f"response {self.status} is not JSON ({e}): {self.body[:500]!r}") from None

    @property
    def error_code(self):
        return self.json().get("code")

    @property
    def error_message(self):
        return self.json().get("message")

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


def build_path(path, query=None):
    if not query:
        return path
    if isinstance(query, dict):
        query = list(query.items())
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode(query, doseq=True)


def q(s):
    """Percent-encodes one path or query component (everything but unreserved characters)."""
    return urllib.parse.quote(s, safe="")


class Client:
    """One isolad endpoint. Every request uses a fresh connection (simple and independent)."""

    def __init__(self, socket_path=None, tcp=None, token=None, timeout=DEFAULT_TIMEOUT):
        self.socket_path = socket_path
        self.tcp = tcp  # (host, port)
        self.token = token
        self.timeout = timeout

    def connection(self, timeout=None):
        t = self.timeout if timeout is None else timeout
        if self.tcp:
            return http.client.HTTPConnection(self.tcp[0], self.tcp[1], timeout=t)
        return UnixHTTPConnection(self.socket_path, timeout=t)

    def _headers(self, headers, body):
        h = {}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            h["Content-Length"] = str(len(body))
        h.update(headers or {})
        return h

    def _send(self, conn, method, path, body, headers):
        """Sends a request; a server that answers early and closes (413) may break the pipe
        while we still send, so a send error is kept and the response is still read."""
        try:
            conn.request(method, path, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def request(self, method, path, body=None, json=None, headers=None, query=None,
                timeout=None):
        if json is not None:
            body = jsonlib.dumps(json).encode()
            headers = dict(headers or {})
            headers.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        conn = self.connection(timeout)
        try:
            self._send(conn, method, build_path(path, query), body, self._headers(headers, body))
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, r.reason, r.headers, data)
        finally:
            conn.close()

    def stream(self, method, path, json=None, body=None, headers=None, query=None, kind=None,
               timeout=20.0):
        """Starts a request whose response is read incrementally. kind: 'ndjson' or 'sse'
        (sets Accept). Returns an EventStream (check .status first)."""
        headers = dict(headers or {})
        if kind == "ndjson":
            headers.setdefault("Accept", "application/x-ndjson")
        elif kind == "sse":
            headers.setdefault("Accept", "text/event-stream")
        if json is not None:
            body = jsonlib.dumps(json).encode()
            headers.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        conn = self.connection(timeout)
        self._send(conn, method, build_path(path, query), body, self._headers(headers, body))
        resp = conn.getresponse()
        if kind is None:
            ct = resp.getheader("Content-Type", "")
            kind = "sse" if "event-stream" in ct else "ndjson"
        return EventStream(conn, resp, kind, timeout)

    # ---- conveniences (assert the happy path so tests read short) ----

    def get_json(self, path, query=None, status=200):
        r = self.request("GET", path, query=query)
        assert r.status == status, f"GET {path}: expected {status}, got {r}"
        return r.json()

    def create_sandbox(self, **fields):
        r = self.request("POST", "/v1/sandboxes", json=fields, timeout=60)
        assert r.status == 201, f"create {fields}: expected 201, got {r}"
        sb = r.json()
        assert isinstance(sb.get("id"), str) and sb["id"], sb
        return sb

    def delete_sandbox(self, sid):
        return self.request("DELETE", f"/v1/sandboxes/{sid}", timeout=60)

    def list_sandboxes(self, query=None):
        return sandbox_list(self.get_json("/v1/sandboxes", query=query))

    def exec(self, sid, cmd=None, command=None, status=200, http_timeout=90, **fields):
        """POST .../exec; `fields` go into the body (timeout there is the command's)."""
        body = dict(fields)
        if cmd is not None:
            body["cmd"] = cmd
        if command is not None:
            body["command"] = command
        r = self.request("POST", f"/v1/sandboxes/{sid}/exec", json=body, timeout=http_timeout)
        assert r.status == status, f"exec {body}: expected {status}, got {r}"
        return r.json()

    def sh(self, sid, script, **fields):
        """Runs `sh -c script`, asserts exit 0, returns stdout."""
        res = self.exec(sid, cmd=["sh", "-c", script], **fields)
        assert res.get("exit_code") == 0, f"sh -c {script!r}: {res}"
        return res["stdout"]

    def write_file(self, sid, path, data, mode=None):
        query = {"path": path}
        if mode is not None:
            query["mode"] = mode
        r = self.request("PUT", f"/v1/sandboxes/{sid}/files", body=data, query=query,
                         headers={"Content-Type": "application/octet-stream"})
        assert r.status in (200, 201, 204), f"PUT {path}: {r}"
        return r

    def read_file(self, sid, path):
        r = self.request("GET", f"/v1/sandboxes/{sid}/files", query={"path": path})
        assert r.status == 200, f"GET {path}: {r}"
        return r.body

    def start_process(self, sid, status=201, **fields):
        r = self.request("POST", f"/v1/sandboxes/{sid}/processes", json=fields)
        assert r.status == status, f"start process {fields}: expected {status}, got {r}"
        return r.json()

    def wait_process(self, sid, pid, timeout=30):
        r = self.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/wait",
                         query={"timeout": timeout}, timeout=timeout + 15)
        assert r.status == 200, f"wait {pid}: {r}"
        return r.json()


def sandbox_list(obj):
    """The list of sandbox objects from GET /v1/sandboxes (a bare array or {sandboxes:[...]})."""
    if isinstance(obj, dict):
        for k in ("sandboxes", "items", "data"):
            if isinstance(obj.get(k), list):
                return obj[k]
        raise AssertionError(f"GET /v1/sandboxes: no list in {obj}")
    assert isinstance(obj, list), obj
    return obj


def item_list(obj, *keys):
    """A list from a bare array or from the first of keys present in an object."""
    if isinstance(obj, list):
        return obj
    assert isinstance(obj, dict), obj
    for k in keys:
        if isinstance(obj.get(k), list):
            return obj[k]
    raise AssertionError(f"no list under {keys} in {obj}")


# ---------------------------------------------------------------------------------------
# Event streams (exec/output): NDJSON lines or Server-Sent Events, bounded reads.

class StreamTimeout(AssertionError):
    pass


class EventStream:
    def __init__(self, conn, resp, kind, timeout):
        self.conn = conn
        self.resp = resp
        self.kind = kind
        self.timeout = timeout
        self.status = resp.status
        self.headers = resp.headers
        self.events = []  # everything read so far
        self._done = False

    def body_if_error(self):
        """For a non-2xx status: reads and returns the (JSON error) body."""
        return Response(self.status, self.resp.reason, self.headers, self.resp.read())

    def _set_timeout(self, t):
        if self.conn.sock is not None:
            self.conn.sock.settimeout(max(0.05, t))

    def _readline(self, deadline):
        self._set_timeout(deadline - time.monotonic())
        try:
            return self.resp.readline(1 << 24)
        except (socket.timeout, TimeoutError):
            raise StreamTimeout(
                f"no event within the time limit; events so far: {summarize(self.events)}"
            ) from None

    def next_event(self, timeout=None):
        """The next event as a dict, or None at the end of the stream."""
        if self._done:
            return None
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if self.kind == "ndjson":
            while True:
                line = self._readline(deadline)
                if not line:
                    self._done = True
                    return None
                line = line.strip()
                if not line:
                    continue
                ev = jsonlib.loads(line)
                self.events.append(ev)
                return ev
        # SSE: fields until a blank line; data lines joined with \n.
        data, name = [], None
        while True:
            line = self._readline(deadline)
            if not line:
                self._done = True
                if data:
                    break
                return None
            line = line.rstrip(b"\r\n")
            if not line:
                if data:
                    break
                continue
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode()
        ev = jsonlib.loads(b"\n".join(data))
        if name and isinstance(ev, dict):
            ev.setdefault("type", name)
            ev["_sse_event"] = name
        self.events.append(ev)
        return ev

    def read_until(self, pred, timeout=None):
        """Reads events until pred(event) is true; returns that event. Bounded."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeout(f"condition not met in time; events: {summarize(self.events)}")
            ev = self.next_event(timeout=left)
            if ev is None:
                raise AssertionError(
                    f"stream ended before the condition; events: {summarize(self.events)}")
            if pred(ev):
                return ev

    def read_output_until(self, needle, timeout=None, stream="stdout"):
        """Reads until the decoded `stream` output contains needle (bytes)."""
        def have(_ev):
            return needle in collect(self.events)[stream]
        if have(None):
            return
        self.read_until(have, timeout)

    def read_all(self, timeout=None):
        """Reads to the end of the stream (bounded); returns all events."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeout(f"stream did not end in time; events: {summarize(self.events)}")
            if self.next_event(timeout=left) is None:
                return self.events

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def decode_data(ev):
    d = ev.get("data", "")
    if isinstance(d, str):
        return base64.b64decode(d)
    return bytes(d)


def collect(events):
    """Joins stream events: {'stdout': bytes, 'stderr': bytes, 'exit': ev|None, 'types': [...]}."""
    out = {"stdout": b"", "stderr": b"", "exit": None, "types": [], "dropped": [], "errors": []}
    for ev in events:
        t = ev.get("type")
        out["types"].append(t)
        if t in ("stdout", "stderr"):
            out[t] += decode_data(ev)
        elif t == "exit":
            out["exit"] = ev
        elif t == "dropped":
            out["dropped"].append(ev)
        elif t == "error":
            out["errors"].append(ev)
    return out


def summarize(events, limit=40):
    s = []
    for ev in events[-limit:]:
        if ev.get("type") in ("stdout", "stderr"):
            s.append(f"{ev['type']}:{decode_data(ev)[:80]!r}")
        else:
            s.append(jsonlib.dumps(ev)[:200])
    return s


# ---------------------------------------------------------------------------------------
# WebSocket (RFC 6455), client side.

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class WebSocketError(AssertionError):
    pass


class WebSocket:
    def __init__(self, sock, leftover=b""):
        self.sock = sock
        self.buf = leftover
        self.closed = False
        self.close_code = None

    @classmethod
    def connect(cls, client, path, timeout=20.0, headers=None):
        """Opens a WebSocket to path on client's endpoint. Raises WebSocketError with the
        HTTP status and body when the server does not switch protocols."""
        if client.tcp:
            sock = socket.create_connection(client.tcp, timeout=timeout)
            host = f"{client.tcp[0]}:{client.tcp[1]}"
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(client.socket_path)
            host = "localhost"
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if client.token:
            lines.append(f"Authorization: Bearer {client.token}")
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in buf:
            if time.monotonic() > deadline:
                raise WebSocketError(f"no handshake response; got {buf[:300]!r}")
            chunk = sock.recv(4096)
            if not chunk:
                raise WebSocketError(f"connection closed during handshake; got {buf[:300]!r}")
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        status_line, *hdr_lines = head.decode("latin-1").split("\r\n")
        hdrs = {}
        for ln in hdr_lines:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        parts = status_line.split(" ", 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if status != 101:
            # Read the rest of the error body (bounded) for the message.
            n = int(hdrs.get("content-length", "0") or 0)
            sock.settimeout(2)
            try:
                while len(rest) < n:
                    c = sock.recv(4096)
                    if not c:
                        break
                    rest += c
            except OSError:
                pass
            sock.close()
            err = WebSocketError(f"WebSocket handshake to {path}: status {status}: {rest[:300]!r}")
            err.status = status
            err.body = rest
            raise err
        want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            sock.close()
            raise WebSocketError(f"bad Sec-WebSocket-Accept {hdrs.get('sec-websocket-accept')!r}")
        if hdrs.get("upgrade", "").lower() != "websocket":
            sock.close()
            raise WebSocketError(f"bad Upgrade header {hdrs.get('upgrade')!r}")
        return cls(sock, rest)

    def send_frame(self, opcode, payload, fin=True):
        if isinstance(payload, str):
            payload = payload.encode()
        head = bytes([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send_binary(self, data):
        self.send_frame(OP_BINARY, data)

    def send_text(self, text):
        self.send_frame(OP_TEXT, text)

    def send_json(self, obj):
        self.send_frame(OP_TEXT, jsonlib.dumps(obj))

    def _need(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeout("WebSocket: no frame within the time limit")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                raise StreamTimeout("WebSocket: no frame within the time limit") from None
            if not chunk:
                raise WebSocketError("WebSocket: connection closed without a close frame")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _read_frame(self, deadline):
        b0, b1 = self._need(2, deadline)
        fin, rsv, opcode = b0 & 0x80, b0 & 0x70, b0 & 0x0F
        if rsv:
            raise WebSocketError(f"WebSocket: RSV bits set ({b0:#x}) without an extension")
        if b1 & 0x80:
            raise WebSocketError("WebSocket: server frames must not be masked (RFC 6455 5.1)")
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._need(2, deadline))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._need(8, deadline))[0]
        if opcode >= 0x8 and (n > 125 or not fin):
            raise WebSocketError("WebSocket: invalid control frame")
        return bool(fin), opcode, self._need(n, deadline)

    def recv(self, timeout=20.0):
        """The next message as (opcode, payload); pings are answered; a close frame returns
        (OP_CLOSE, payload) and marks the socket closed."""
        deadline = time.monotonic() + timeout
        msg_op, parts = None, []
        while True:
            fin, op, payload = self._read_frame(deadline)
            if op == OP_PING:
                self.send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self.closed = True
                if len(payload) >= 2:
                    self.close_code = struct.unpack("!H", payload[:2])[0]
                try:
                    self.send_frame(OP_CLOSE, payload[:2])
                except OSError:
                    pass
                return OP_CLOSE, payload
            if op == OP_CONT:
                if msg_op is None:
                    raise WebSocketError("WebSocket: continuation without a message")
            else:
                if msg_op is not None:
                    raise WebSocketError("WebSocket: new message inside a fragmented one")
                msg_op = op
            parts.append(payload)
            if fin:
                return msg_op, b"".join(parts)

    def close(self, code=1000):
        if not self.closed:
            try:
                self.send_frame(OP_CLOSE, struct.pack("!H", code))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PtySession:
    """Reads a process's terminal over WebSocket: binary frames are output, text frames JSON."""

    def __init__(self, ws):
        self.ws = ws
        self.output = b""
        self.controls = []
        self.exit = None

    def pump_until(self, pred, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not pred(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise StreamTimeout(f"PTY: condition not met; output so far {self.output[-500:]!r},"
                                    f" controls {self.controls}")
            op, payload = self.ws.recv(timeout=left)
            if op == OP_BINARY:
                self.output += payload
            elif op == OP_TEXT:
                msg = jsonlib.loads(payload)
                self.controls.append(msg)
                if msg.get("type") == "exit":
                    self.exit = msg
            elif op == OP_CLOSE:
                if not pred(self):
                    raise AssertionError(f"PTY: WebSocket closed; output {self.output[-500:]!r}, "
                                         f"controls {self.controls}")
                return

    def wait_output(self, regex, timeout=20.0, start=0):
        rx = re.compile(regex)
        self.pump_until(lambda s: rx.search(s.output, start) is not None, timeout)
        return rx.search(self.output, start)


# ---------------------------------------------------------------------------------------
# Host-side probes: judge a boundary from the host, not from what the sandbox says.

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def proc_status(pid):
    """/proc/<pid>/status as a dict of strings, or None if gone."""
    raw = _read(f"/proc/{pid}/status")
    if raw is None:
        return None
    d = {}
    for line in raw.decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        d[k] = v.strip()
    return d


def vmrss_kib(pid):
    st = proc_status(pid)
    if not st or "VmRSS" not in st:
        return None
    return int(st["VmRSS"].split()[0])


def host_uid(pid):
    st = proc_status(pid)
    return None if st is None else int(st["Uid"].split()[1])  # effective uid


def sandbox_host_pids(sid):
    """Host pids of every process whose cgroup path contains /isola/<sid>."""
    needle = f"/isola/{sid}"
    pids = []
    for pid in all_pids():
        raw = _read(f"/proc/{pid}/cgroup")
        if raw and any(line.split(":", 2)[-1] == needle or
                       line.split(":", 2)[-1].startswith(needle + "/")
                       for line in raw.decode(errors="replace").splitlines()):
            pids.append(pid)
    return pids


def ns_pid(pid):
    """The pid as seen in its innermost pid namespace (last NSpid field)."""
    st = proc_status(pid)
    if not st or "NSpid" not in st:
        return None
    return int(st["NSpid"].split()[-1])


def sandbox_init_pid(sid, timeout=10.0):
    """Host pid of the sandbox's PID 1 (the agent), found through its cgroup."""
    deadline = time.monotonic() + timeout
    while True:
        for pid in sandbox_host_pids(sid):
            if ns_pid(pid) == 1:
                return pid
        if time.monotonic() > deadline:
            raise AssertionError(f"sandbox {sid}: no process with NSpid 1 in cgroup isola/{sid}")
        time.sleep(0.1)


def uid_map(pid):
    """[(inside, outside, count)] from /proc/<pid>/uid_map."""
    raw = _read(f"/proc/{pid}/uid_map")
    if raw is None:
        return None
    return [tuple(int(x) for x in ln.split()) for ln in raw.decode().splitlines() if ln.strip()]


def pids_with_uid_in(lo, hi):
    """Host pids whose real, effective, saved or fs uid is in [lo, hi)."""
    out = []
    for pid in all_pids():
        st = proc_status(pid)
        if st and "Uid" in st and any(lo <= int(u) < hi for u in st["Uid"].split()):
            out.append(pid)
    return out


def ns_inode(pid, ns):
    try:
        return os.stat(f"/proc/{pid}/ns/{ns}").st_ino
    except OSError:
        return None


def isola_cgroup_ids(pid):
    """Sandbox ids of the isola/<id> cgroups pid is in."""
    raw = _read(f"/proc/{pid}/cgroup") or b""
    return {m.group(1) for m in re.finditer(r"/isola/([^/\n]+)", raw.decode(errors="replace"))}


def sandbox_leftovers(sid, uid_range, pidns, userns):
    """Host pids still belonging to a destroyed sandbox: in its cgroup, its pid or user
    namespace, or owning a uid of its range (other isolads on the same host may reuse that
    range for their own sandboxes: those, in another isola/<id> cgroup, are not counted)."""
    out = []
    for pid in all_pids():
        ids = isola_cgroup_ids(pid)
        if sid in ids or (pidns and ns_inode(pid, "pid") == pidns) or \
                (userns and ns_inode(pid, "user") == userns):
            out.append(pid)
            continue
        st = proc_status(pid)
        if st and "Uid" in st and any(uid_range[0] <= int(u) < uid_range[1]
                                      for u in st["Uid"].split()) and not (ids - {sid}):
            out.append(pid)
    return out


def isolad_hash(state_dir):
    """FNV-1a of an isolad's state dir (src/isolad/net/net.c table_name): names its nftables
    table and prefixes its host interfaces."""
    h = 2166136261
    for ch in state_dir.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


def nft_table(state_dir):
    """The nftables table (family inet) of the isolad on state_dir."""
    return "isola_%08x" % isolad_hash(state_dir)


def mounts_referencing(path):
    raw = _read("/proc/self/mountinfo") or b""
    return [ln for ln in raw.decode(errors="replace").splitlines() if path in ln]


def cgroup_dirs(sid=None):
    """isola cgroup directories on this host (all, or those of one sandbox)."""
    pats = ["/sys/fs/cgroup/*/isola/*", "/sys/fs/cgroup/isola/*"]
    found = set()
    for p in pats:
        for d in glob.glob(p):
            if os.path.isdir(d) and (sid is None or os.path.basename(d) == sid):
                found.add(d)
    return sorted(found)


def wait_for(pred, timeout, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
