# SPDX-License-Identifier: Apache-2.0
"""Typed views of the API's JSON objects. Every model keeps the full object in `raw`, so a
field added by a newer isolad is never lost."""

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


def _b64(s: Optional[str]) -> bytes:
    return base64.b64decode(s) if s else b""


@dataclass
class Health:
    status: str
    version: str
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Health":
        return cls(status=d.get("status", ""), version=d.get("version", ""), raw=d)


@dataclass
class SandboxInfo:
    """A sandbox as isolad reports it (GET /v1/sandboxes/{id})."""

    id: str
    state: str
    tier: str
    template: str
    labels: Dict[str, str] = field(default_factory=dict)
    created_at: Optional[float] = None
    expires_at: Optional[float] = None
    persistence: Dict[str, str] = field(default_factory=dict)
    error: Optional[str] = None
    cpu: Optional[float] = None
    memory: Optional[int] = None
    disk: Optional[int] = None
    pids: Optional[int] = None
    env: Dict[str, str] = field(default_factory=dict)
    workdir: Optional[str] = None
    user: Optional[str] = None
    name: Optional[str] = None
    end_reason: Optional[str] = None  # ended (a tombstone) or error: expired|idle|destroyed|error
    ended_at: Optional[float] = None
    detail: Optional[str] = None  # e.g. "ttl 3s", or the error
    capabilities: List[str] = field(default_factory=list)  # what the sandbox's root holds
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SandboxInfo":
        limits = d.get("limits") or {}
        return cls(
            id=d["id"], state=d.get("state", ""), tier=d.get("tier", ""),
            template=d.get("template", ""), labels=dict(d.get("labels") or {}),
            created_at=d.get("created_at"), expires_at=d.get("expires_at"),
            persistence=dict(d.get("persistence") or {}), error=d.get("error"),
            cpu=d.get("cpu", limits.get("cpu")), memory=d.get("memory", limits.get("memory")),
            disk=d.get("disk", limits.get("disk")), pids=d.get("pids", limits.get("pids")),
            env=dict(d.get("env") or {}), workdir=d.get("workdir"), user=d.get("user"),
            capabilities=list(d.get("capabilities") or []),
            name=d.get("name") or None, end_reason=d.get("end_reason"),
            ended_at=d.get("ended_at"), detail=d.get("detail"), raw=d)


@dataclass
class ExitStatus:
    """How a command ended: exit_code is 128+N when killed by signal N."""

    exit_code: int
    signal: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    duration_ms: int = 0
    pid: Optional[int] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ExitStatus":
        return cls(exit_code=d.get("exit_code") if d.get("exit_code") is not None else -1,
                   signal=d.get("signal") or 0, timed_out=bool(d.get("timed_out")),
                   oom_killed=bool(d.get("oom_killed")), duration_ms=d.get("duration_ms") or 0,
                   pid=d.get("pid"))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class ExecResult:
    """A finished command: its output (each stream's first max_output bytes) and exit."""

    stdout: str
    stderr: str
    exit_code: int
    signal: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    duration_ms: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_raw: bytes = b""  # exact bytes (also when the output was not UTF-8)
    stderr_raw: bytes = b""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ExecResult":
        out, err = d.get("stdout", ""), d.get("stderr", "")
        return cls(
            stdout=out, stderr=err,
            exit_code=d.get("exit_code") if d.get("exit_code") is not None else -1,
            signal=d.get("signal") or 0, timed_out=bool(d.get("timed_out")),
            oom_killed=bool(d.get("oom_killed")), duration_ms=d.get("duration_ms") or 0,
            stdout_truncated=bool(d.get("stdout_truncated")),
            stderr_truncated=bool(d.get("stderr_truncated")),
            stdout_bytes=d.get("stdout_bytes", 0), stderr_bytes=d.get("stderr_bytes", 0),
            stdout_raw=_b64(d["stdout_b64"]) if "stdout_b64" in d else out.encode(),
            stderr_raw=_b64(d["stderr_b64"]) if "stderr_b64" in d else err.encode(),
            raw=d)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class OutputResult:
    """Buffered output of a background process; `exit` is None while it runs."""

    stdout: bytes
    stderr: bytes
    exit: Optional[ExitStatus]
    dropped: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "OutputResult":
        out = _b64(d["stdout_b64"]) if "stdout_b64" in d else d.get("stdout", "").encode()
        err = _b64(d["stderr_b64"]) if "stderr_b64" in d else d.get("stderr", "").encode()
        ex = ExitStatus.from_json(d) if d.get("exit_code") is not None else None
        return cls(stdout=out, stderr=err, exit=ex, dropped=list(d.get("dropped") or []), raw=d)


@dataclass
class Event:
    """One event of an exec or output stream.

    type: start (pid), stdout/stderr (data), dropped (stream, bytes), exit (exit), error
    (code, message).
    """

    type: str
    pid: Optional[int] = None
    data: bytes = b""
    stream: Optional[str] = None
    bytes: int = 0
    exit: Optional[ExitStatus] = None
    code: Optional[str] = None
    message: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Event":
        t = d.get("type", "")
        return cls(type=t, pid=d.get("pid"),
                   data=_b64(d.get("data")) if t in ("stdout", "stderr") else b"",
                   stream=d.get("stream"), bytes=d.get("bytes") or 0,
                   exit=ExitStatus.from_json(d) if t == "exit" else None,
                   code=d.get("code"), message=d.get("message"), raw=d)


@dataclass
class Process:
    """A background process as the sandbox's agent reports it."""

    pid: int
    argv: List[str]
    running: bool
    tty: bool = False
    tag: Optional[str] = None
    exit_code: Optional[int] = None
    signal: int = 0
    started_at: Optional[float] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Process":
        return cls(pid=d["pid"], argv=list(d.get("argv") or []), running=bool(d.get("running")),
                   tty=bool(d.get("tty")), tag=d.get("tag"), exit_code=d.get("exit_code"),
                   signal=d.get("signal") or 0, started_at=d.get("started_at"), raw=d)


@dataclass
class Entry:
    """A file system entry in a sandbox."""

    name: str
    type: str  # file, dir, symlink, other
    path: Optional[str] = None
    size: int = 0
    mode: int = 0
    uid: int = 0
    gid: int = 0
    mtime: int = 0
    target: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Entry":
        return cls(name=d.get("name", ""), type=d.get("type", "other"), path=d.get("path"),
                   size=d.get("size") or 0, mode=d.get("mode") or 0, uid=d.get("uid") or 0,
                   gid=d.get("gid") or 0, mtime=d.get("mtime") or 0, target=d.get("target"),
                   raw=d)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


@dataclass
class Listing:
    """A directory listing; iterable over its entries."""

    entries: List[Entry]
    truncated: bool = False

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> List[str]:
        return [e.name for e in self.entries]


@dataclass
class ArchiveResult:
    """What PUT .../archive extracted."""

    entries: int
    bytes: int


@dataclass
class Template:
    name: str
    id: Optional[str] = None
    source: Optional[str] = None
    size_bytes: Optional[int] = None
    created_at: Optional[float] = None
    default_user: Optional[str] = None
    workdir: Optional[str] = None
    origin: Optional[str] = None  # pulls: "REF@sha256:<digest>"
    layers: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Template":
        return cls(name=d.get("name", ""), id=d.get("id"), source=d.get("source"),
                   size_bytes=d.get("size_bytes"), created_at=d.get("created_at"),
                   default_user=d.get("default_user"), workdir=d.get("workdir"),
                   origin=d.get("origin"), layers=d.get("layers"), raw=d)


@dataclass
class ImportProgress:
    """A progress event of a template import."""

    phase: str
    done: int
    total: int


@dataclass
class Snapshot:
    """A snapshot (GET /v1/snapshots/{name}): immutable; `level` says what it holds
    ("files" or "files+memory"); `parent` names the snapshot its source was restored from."""

    name: str
    id: str
    tier: str
    template: str
    level: str
    size: int
    created_at: Optional[float] = None
    source: Optional[str] = None
    parent: Optional[str] = None
    state: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(name=d.get("name", ""), id=d.get("id", ""), tier=d.get("tier", ""),
                   template=d.get("template", ""), level=d.get("level", ""),
                   size=int(d.get("size") or 0), created_at=d.get("created_at"),
                   source=d.get("source"), parent=d.get("parent"), state=d.get("state"), raw=d)


@dataclass
class Exposure:
    """A sandbox port reachable from the host (POST /v1/sandboxes/{id}/ports). `token` is
    None for a public exposure."""

    port: int
    url: str
    public: bool = False
    token: Optional[str] = None
    path_url: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Exposure":
        return cls(port=int(d.get("port") or 0), url=d.get("url", ""),
                   public=bool(d.get("public")), token=d.get("token"),
                   path_url=d.get("path_url"), raw=d)
