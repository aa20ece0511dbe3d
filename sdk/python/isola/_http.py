# SPDX-License-Identifier: Apache-2.0
"""HTTP/1.1 to isolad over its unix socket or TCP (bearer token), on http.client."""

import http.client
import json
import os
import socket
import urllib.parse
from typing import Any, Dict, Iterator, Optional, Tuple

from . import errors

DEFAULT_SOCKET = "/run/isola/isolad.sock"
USER_AGENT = "isola-python/0.1.0"
MAX_ERROR_BODY = 64 * 1024
MAX_LINE = 16 * 1024 * 1024
FOREVER = float("inf")  # a timeout argument meaning: no socket timeout


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def query_string(query) -> str:
    if not query:
        return ""
    items = query.items() if isinstance(query, dict) else query
    pairs = [(k, _qv(v)) for k, v in items if v is not None]
    return "?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote) if pairs else ""


def _qv(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def seg(s: Any) -> str:
    """One path segment, percent-encoded."""
    return urllib.parse.quote(str(s), safe="")


class Transport:
    """Where isolad is and how to open a connection to it. Every request opens its own
    connection, so one Client may be used from several threads."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = 60.0):
        if url is None and socket_path is None:
            url = os.environ.get("ISOLA_URL") or None
            socket_path = os.environ.get("ISOLA_SOCKET") or DEFAULT_SOCKET
        if token is None:
            token = os.environ.get("ISOLA_TOKEN") or None
        self.socket_path = socket_path
        self.token = token
        self.timeout = timeout
        self.host: Optional[str] = None
        self.port: Optional[int] = None
        self.prefix = ""
        if url:
            u = urllib.parse.urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"url `{url}`: expected http://HOST:PORT")
            self.host, self.port = u.hostname, u.port or 80
            self.prefix = u.path.rstrip("/")

    @property
    def where(self) -> str:
        return f"http://{self.host}:{self.port}" if self.host else self.socket_path

    def connect(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if t == FOREVER:
            t = None
        if self.host:
            return http.client.HTTPConnection(self.host, self.port, timeout=t)
        return _UnixConnection(self.socket_path, t)

    def raw_socket(self, timeout: Optional[float]) -> Tuple[socket.socket, str]:
        """A connected socket and the Host header value (for WebSocket upgrades)."""
        if self.host:
            return socket.create_connection((self.host, self.port), timeout=timeout), \
                f"{self.host}:{self.port}"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.socket_path)
        except BaseException:
            s.close()
            raise
        return s, "localhost"

    def headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        h = {"User-Agent": USER_AGENT}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def open(self, method: str, path: str, *, query=None, json_body: Any = None,
             body: Any = None, headers: Optional[Dict[str, str]] = None,
             timeout: Optional[float] = None, ok=(200, 201, 204, 206)) -> "Reply":
        """Sends a request and returns the open reply once its status is a success; raises
        the typed error otherwise. body may be bytes, a file object (with Content-Length
        from its size when it is a real file) or an iterable of bytes (chunked)."""
        h = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
        if isinstance(body, (bytes, bytearray)):
            h["Content-Length"] = str(len(body))
        elif body is not None and hasattr(body, "read"):
            try:
                st = os.fstat(body.fileno())
                h["Content-Length"] = str(st.st_size - body.tell())
            except (AttributeError, OSError, ValueError):
                body = _chunks(body)
        elif body is None and method in ("POST", "PUT"):
            h["Content-Length"] = "0"
        conn = self.connect(timeout)
        url = self.prefix + path + query_string(query)
        try:
            try:
                conn.request(method, url, body=body, headers=self.headers(h),
                             encode_chunked=body is not None and "Content-Length" not in h)
            except (BrokenPipeError, ConnectionResetError):
                pass  # isolad may answer early (413) and close: read its answer below
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise errors.UnavailableError(f"cannot reach isolad at {self.where}: {e}",
                                          "unavailable") from e
        if resp.status not in ok:
            try:
                data = resp.read(MAX_ERROR_BODY)
            except (OSError, http.client.HTTPException):
                data = b""
            conn.close()
            err = _error_from(resp.status, data, method, path)
            if isinstance(err, errors.RateLimitedError):
                try:
                    err.retry_after = float(resp.headers.get("Retry-After", ""))
                except ValueError:
                    pass
            raise err
        return Reply(conn, resp)

    def json(self, method: str, path: str, **kw) -> Any:
        """A request whose reply is one JSON document (None for 204)."""
        r = self.open(method, path, **kw)
        try:
            data = r.read_all()
        finally:
            r.close()
        if r.status == 204 or not data:
            return None
        try:
            return json.loads(data)
        except ValueError as e:
            raise errors.ProtocolError(f"isolad sent malformed JSON: {e}", "internal",
                                       r.status) from None


def _chunks(f, size: int = 65536) -> Iterator[bytes]:
    while True:
        b = f.read(size)
        if not b:
            return
        yield b.encode() if isinstance(b, str) else b


def _error_from(status: int, data: bytes, method: str, path: str) -> errors.IsolaError:
    code = message = body = None
    try:
        d = json.loads(data)
        if isinstance(d, dict) and isinstance(d.get("error"), dict):
            d = d["error"]
        if isinstance(d, dict):
            code, message, body = d.get("code"), d.get("message"), d
    except ValueError:
        pass
    if not message:
        message = f"isolad replied HTTP {status} to {method} {path}"
    return errors.error_for(code, message, status, body)


class Reply:
    """An open successful response; read it whole, in chunks, or as lines. Close it."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.headers = resp.headers

    def set_timeout(self, t: Optional[float]) -> None:
        if self.conn.sock is not None:
            self.conn.sock.settimeout(t)

    def read_all(self) -> bytes:
        try:
            return self.resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise errors.ProtocolError(f"reply from isolad broke off: {e}", "internal",
                                       self.status) from e

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        try:
            while True:
                b = self.resp.read1(size) if hasattr(self.resp, "read1") else self.resp.read(size)
                if not b:
                    return
                yield b
        except (OSError, http.client.HTTPException) as e:
            raise errors.ProtocolError(f"reply from isolad broke off: {e}", "internal",
                                       self.status) from e

    def json_lines(self) -> Iterator[Dict[str, Any]]:
        """Each NDJSON line as an object; raises ProtocolError on a malformed line."""
        while True:
            try:
                line = self.resp.readline(MAX_LINE + 1)
            except socket.timeout:
                raise
            except (OSError, http.client.HTTPException) as e:
                raise errors.ProtocolError(f"event stream from isolad broke off: {e}",
                                           "internal", self.status) from e
            if not line:
                return
            if len(line) > MAX_LINE:
                raise errors.ProtocolError("isolad sent an event over 16 MiB", "too_large")
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise errors.ProtocolError(f"isolad sent a malformed event: {e}",
                                           "internal") from None
            if isinstance(ev, dict):
                yield ev

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
