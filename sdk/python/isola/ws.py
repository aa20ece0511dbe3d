# SPDX-License-Identifier: Apache-2.0
"""A small RFC 6455 WebSocket client (stdlib) and the PTY/attach session built on it."""

import base64
import hashlib
import json
import os
import re
import socket
import struct
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from . import errors
from .models import ExitStatus

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 16 * 1024 * 1024
MAX_HANDSHAKE = 64 * 1024


class WebSocketError(errors.ProtocolError):
    pass


class WebSocket:
    """A client WebSocket on a connected socket (frames masked, pings answered)."""

    def __init__(self, sock: socket.socket, leftover: bytes = b""):
        self.sock = sock
        self.buf = leftover
        self.closed = False
        self.close_code: Optional[int] = None

    @classmethod
    def connect(cls, transport, path: str, timeout: float = 30.0) -> "WebSocket":
        """Opens a WebSocket to path; a refused upgrade raises the API's typed error."""
        try:
            sock, host = transport.raw_socket(timeout)
        except OSError as e:
            raise errors.UnavailableError(f"cannot reach isolad at {transport.where}: {e}",
                                          "unavailable") from e
        try:
            return cls._handshake(sock, host, transport, path, timeout)
        except BaseException:
            sock.close()
            raise

    @classmethod
    def _handshake(cls, sock, host, transport, path, timeout) -> "WebSocket":
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {transport.prefix}{path} HTTP/1.1", f"Host: {host}",
                 "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13"]
        lines += [f"{k}: {v}" for k, v in transport.headers().items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HANDSHAKE:
                raise WebSocketError("WebSocket handshake reply too large")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WebSocketError("no WebSocket handshake reply in time", "timeout")
            sock.settimeout(left)
            chunk = sock.recv(4096)
            if not chunk:
                raise WebSocketError("connection closed during the WebSocket handshake")
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
            n = min(int(hdrs.get("content-length", "0") or 0), MAX_HANDSHAKE)
            sock.settimeout(2)
            try:
                while len(rest) < n:
                    c = sock.recv(4096)
                    if not c:
                        break
                    rest += c
            except OSError:
                pass
            code, message = None, f"WebSocket upgrade refused with HTTP {status}"
            try:
                d = json.loads(rest[:n] if n else rest)
                code, message = d.get("code"), d.get("message") or message
            except (ValueError, AttributeError):
                pass
            raise errors.error_for(code, message, status)
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            raise WebSocketError("bad Sec-WebSocket-Accept from isolad")
        sock.settimeout(None)
        return cls(sock, rest)

    def send_frame(self, opcode: int, payload: Union[bytes, str]) -> None:
        if isinstance(payload, str):
            payload = payload.encode()
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        # XOR with the repeated mask via big integers: fast without numpy.
        rep = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(rep, "big")).to_bytes(n, "big") \
            if n else b""
        self.sock.sendall(head + mask + masked)

    def _need(self, n: int, deadline: Optional[float]) -> bytes:
        while len(self.buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("WebSocket: nothing received in time")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise WebSocketError("WebSocket closed by isolad without a close frame")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, timeout: Optional[float] = None) -> Tuple[int, bytes]:
        """The next message (opcode, payload). A close frame is answered and returned as
        (OP_CLOSE, payload). Raises socket.timeout when nothing arrives in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        msg_op, parts, size = None, [], 0
        while True:
            b0, b1 = self._need(2, deadline)
            fin, op = b0 & 0x80, b0 & 0x0F
            if b0 & 0x70 or b1 & 0x80:
                raise WebSocketError("WebSocket: bad frame header from isolad")
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._need(2, deadline))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._need(8, deadline))[0]
            size += n
            if size > MAX_MESSAGE:
                raise WebSocketError("WebSocket message over 16 MiB")
            payload = self._need(n, deadline)
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
            if op != OP_CONT:
                msg_op = op
            elif msg_op is None:
                raise WebSocketError("WebSocket: continuation without a message")
            parts.append(payload)
            if fin:
                return msg_op, b"".join(parts)

    def close(self, code: int = 1000) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.send_frame(OP_CLOSE, struct.pack("!H", code))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass


class PtySession:
    """An attached process (GET .../processes/{pid}/ws): output arrives as bytes, input and
    control commands go out. Closing the session detaches without stopping the process."""

    def __init__(self, ws: WebSocket):
        self.ws = ws
        self.output = b""  # everything received so far
        self.controls: List[Dict[str, Any]] = []  # text frames (dropped, error, exit)
        self.exit: Optional[ExitStatus] = None

    def send(self, data: Union[bytes, str]) -> None:
        """Writes to the process's stdin (terminal input for a tty)."""
        self.ws.send_frame(OP_BINARY, data.encode() if isinstance(data, str) else data)

    def resize(self, cols: int, rows: int) -> None:
        self.ws.send_frame(OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def signal(self, sig: Union[int, str]) -> None:
        self.ws.send_frame(OP_TEXT, json.dumps({"type": "signal", "signal": sig}))

    def close_stdin(self) -> None:
        self.ws.send_frame(OP_TEXT, json.dumps({"type": "close_stdin"}))

    def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next output bytes (b"" for a control message, recorded in `controls`), or
        None once the session ended. Raises socket.timeout when nothing arrives in time."""
        if self.ws.closed:
            return None
        op, payload = self.ws.recv(timeout)
        if op == OP_BINARY:
            self.output += payload
            return payload
        if op == OP_TEXT:
            msg = json.loads(payload)
            self.controls.append(msg)
            if msg.get("type") == "exit":
                self.exit = ExitStatus.from_json(msg)
            return b""
        if op == OP_CLOSE:
            return None
        return b""

    def read_until(self, pattern: Union[bytes, str, "re.Pattern"], timeout: float = 30.0,
                   start: int = 0) -> "re.Match":
        """Reads until the output (from offset start) matches pattern (a regex)."""
        if isinstance(pattern, str):
            pattern = pattern.encode()
        rx = re.compile(pattern) if isinstance(pattern, bytes) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.output, start)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError(
                    f"PTY output did not match {rx.pattern!r} in {timeout}s; "
                    f"last output {self.output[-300:]!r}", "timeout")
            try:
                if self.recv(left) is None:
                    raise errors.ProtocolError(
                        f"session ended before {rx.pattern!r}; output {self.output[-300:]!r}")
            except socket.timeout:
                continue

    def wait(self, timeout: float = 60.0) -> ExitStatus:
        """Reads until the process's exit message; returns it."""
        deadline = time.monotonic() + timeout
        while self.exit is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.TimeoutError(f"process did not exit within {timeout}s", "timeout")
            try:
                if self.recv(left) is None and self.exit is None:
                    raise errors.ProtocolError("session closed without an exit message")
            except socket.timeout:
                continue
        return self.exit

    def close(self) -> None:
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


OutputCallback = Callable[[bytes], Any]
