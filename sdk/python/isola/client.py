# SPDX-License-Identifier: Apache-2.0
"""The isola client: sandboxes, commands, processes, files, archives, templates."""

import os
import shutil
import socket
import tarfile
import tempfile
from typing import (IO, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Union)

from . import _extract, code as _code, errors
from ._http import FOREVER, Transport, seg
from .models import (ArchiveResult, Entry, Event, ExecResult, ExitStatus, Health,
                     Exposure, ImportProgress, Listing, OutputResult, Process, SandboxInfo,
                     Snapshot, Template)
from .ws import PtySession, WebSocket

Command = Union[str, Sequence[str]]
Callback = Callable[[bytes], Any]

# Headroom added to a command's own timeout for the HTTP read timeout.
_SLACK = 30.0


def _cmd_fields(cmd: Command) -> Dict[str, Any]:
    """A str runs under /bin/sh -c ("command"); a sequence is the argv ("cmd")."""
    if isinstance(cmd, str):
        return {"command": cmd}
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("empty command")
    return {"cmd": argv}


_NARROW_KEYS = ("gid", "additional_gids", "umask", "rlimits", "rlimits_cap", "oom_score_adj")


def _narrow_fields(narrow: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A command's narrowing fields (docs/process-tier.md), checked for unknown keys."""
    if not narrow:
        return {}
    unknown = set(narrow) - set(_NARROW_KEYS)
    if unknown:
        raise ValueError(f"narrow: unknown field(s) {sorted(unknown)}; known: {_NARROW_KEYS}")
    return {k: (list(v) if k in ("additional_gids", "rlimits") else v)
            for k, v in narrow.items()}


def _http_timeout(cmd_timeout: Optional[float]) -> float:
    """The socket timeout for a call that lasts as long as a command: its timeout plus
    slack, or none at all when the command has none (it may run for hours)."""
    return FOREVER if not cmd_timeout else float(cmd_timeout) + _SLACK


def _put(d: Dict[str, Any], **kw) -> Dict[str, Any]:
    for k, v in kw.items():
        if v is not None:
            d[k] = v
    return d


class Client:
    """One isolad endpoint.

    Client() reads ISOLA_URL / ISOLA_SOCKET / ISOLA_TOKEN like the CLI (default socket
    /run/isola/isolad.sock). Client(socket_path=...) or Client(url="http://HOST:PORT",
    token=...) chooses explicitly. `timeout` bounds each network wait (seconds); streaming
    and waiting calls extend it by their own timeout. Thread-safe: every request uses its
    own connection.
    """

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = 60.0):
        self.transport = Transport(socket_path=socket_path, url=url, token=token,
                                   timeout=timeout)

    # -- host --------------------------------------------------------------------------
    def health(self) -> Health:
        return Health.from_json(self.transport.json("GET", "/v1/health"))

    def doctor(self) -> Dict[str, Any]:
        """The host capability report (one object per check)."""
        return self.transport.json("GET", "/v1/doctor")

    def whoami(self) -> Dict[str, Any]:
        """The caller as isolad resolved it: {who, tenant, role}."""
        return self.transport.json("GET", "/v1/whoami")

    def metrics(self) -> str:
        """Prometheus metrics (text format 0.0.4)."""
        with self.transport.open("GET", "/metrics") as r:
            return r.read_all().decode("utf-8", "replace")

    def compliance(self) -> Dict[str, Any]:
        """This installation's compliance posture as evidence (operator)."""
        return self.transport.json("GET", "/v1/compliance")

    # -- tokens, tenants, audit (admin / operator) ----------------------------------------
    def create_token(self, *, tenant: Optional[str] = None, role: Optional[str] = None,
                     name: Optional[str] = None) -> Dict[str, Any]:
        """Creates an API token; the secret is in the reply's `token`, shown only once."""
        return self.transport.json("POST", "/v1/tokens",
                                   json_body=_put({}, tenant=tenant, role=role, name=name))

    def list_tokens(self, tenant: Optional[str] = None) -> List[Dict[str, Any]]:
        """Token inventory (never secrets)."""
        d = self.transport.json("GET", "/v1/tokens", query={"tenant": tenant})
        return d.get("tokens", [])

    def revoke_token(self, token_id: str) -> None:
        self.transport.json("DELETE", f"/v1/tokens/{seg(token_id)}")

    def create_tenant(self, name: str, **quota: Any) -> Dict[str, Any]:
        """Creates a tenant; quota fields as in the API (max_sandboxes, max_cpu, ...)."""
        return self.transport.json("POST", "/v1/tenants", json_body=dict(quota, name=name))

    def list_tenants(self) -> List[Dict[str, Any]]:
        return self.transport.json("GET", "/v1/tenants").get("tenants", [])

    def get_tenant(self, name: str) -> Dict[str, Any]:
        return self.transport.json("GET", f"/v1/tenants/{seg(name)}")

    def update_tenant(self, name: str, **quota: Any) -> Dict[str, Any]:
        """Changes a tenant's quotas; fields not given keep their value."""
        return self.transport.json("PUT", f"/v1/tenants/{seg(name)}", json_body=quota)

    def delete_tenant(self, name: str) -> None:
        self.transport.json("DELETE", f"/v1/tenants/{seg(name)}")

    def audit_verify(self) -> Dict[str, Any]:
        """Checks the audit trail: {ok, records, segments, sealed, ..., problems}."""
        return self.transport.json("GET", "/v1/audit/verify")

    def audit_export(self, since: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """Audit records, one dict per JSON line (streamed)."""
        r = self.transport.open("GET", "/v1/audit/export", query={"since": since})
        try:
            yield from r.json_lines()
        finally:
            r.close()

    def audit_seal(self) -> Dict[str, Any]:
        return self.transport.json("POST", "/v1/audit/seal") or {}

    def audit_prune(self, max_age: Optional[int] = None) -> Dict[str, Any]:
        return self.transport.json("POST", "/v1/audit/prune", json_body=_put({}, max_age=max_age))

    # -- sandboxes ---------------------------------------------------------------------
    def create_sandbox(self, template: Optional[str] = None, *, tier: Optional[str] = None,
                       cpu: Optional[float] = None, memory: Union[int, str, None] = None,
                       disk: Union[int, str, None] = None, pids: Optional[int] = None,
                       env: Optional[Mapping[str, str]] = None, workdir: Optional[str] = None,
                       user: Optional[str] = None, ttl: Optional[int] = None,
                       labels: Optional[Mapping[str, str]] = None,
                       snapshot: Optional[str] = None,
                       network: Optional[Mapping[str, Any]] = None,
                       on_timeout: Optional[str] = None, idle_timeout: Optional[int] = None,
                       auto_resume: Optional[bool] = None,
                       name: Optional[str] = None,
                       cap_add: Optional[Sequence[str]] = None,
                       cap_drop: Optional[Sequence[str]] = None,
                       tmpfs: Optional[Sequence[Mapping[str, Any]]] = None,
                       masked_paths: Optional[Sequence[str]] = None,
                       readonly_paths: Optional[Sequence[str]] = None,
                       seccomp: Optional[Mapping[str, Any]] = None,
                       readonly_root: Optional[bool] = None) -> "Sandbox":
        """Creates and starts a sandbox (POST /v1/sandboxes). memory/disk: bytes or "512M".
        cap_add/cap_drop: capability names ("CHOWN" or "CAP_CHOWN"; cap_drop also "ALL")
        changing what the sandbox's root holds (docs/process-tier.md); a never-listed one
        in cap_add is refused with InvalidError.
        snapshot: start from that named snapshot instead of a template. network: the egress
        policy ({"default", "allow", "deny"}, docs/network.md). on_timeout: "kill", "pause"
        or "hibernate" when the TTL or idle_timeout (seconds) runs out. name: unique among
        the tenant's live sandboxes (NameTakenError otherwise), usable wherever an id is.
        tmpfs: [{"destination", "size"?, "mode"?, "noexec"?, "readonly"?}] new tmpfs mounts
        (nosuid, nodev; size bounded by the memory limit); masked_paths / readonly_paths:
        paths covered (a file reads empty, a directory is empty) or made read-only inside the
        sandbox; missing ones are skipped (docs/oci.md). seccomp: an OCI `linux.seccomp`
        profile ({"defaultAction", "syscalls": [{"names", "action", "errnoRet"?, "args"?}],
        ...}) every process started in the sandbox runs under, on top of isola's own filter
        (process tier). readonly_root: the root filesystem read-only (the tmpfs mounts,
        /dev/shm and /dev/mqueue stay writable; docker run --read-only). Any token may set
        them."""
        body = _put({}, template=template, tier=tier, cpu=cpu, memory=memory, disk=disk,
                    pids=pids, env=dict(env) if env is not None else None, workdir=workdir,
                    user=user, ttl=ttl, labels=dict(labels) if labels is not None else None,
                    snapshot=snapshot, network=dict(network) if network is not None else None,
                    on_timeout=on_timeout, idle_timeout=idle_timeout, auto_resume=auto_resume,
                    name=name,
                    cap_add=list(cap_add) if cap_add is not None else None,
                    cap_drop=list(cap_drop) if cap_drop is not None else None,
                    tmpfs=[dict(t) for t in tmpfs] if tmpfs is not None else None,
                    masked_paths=list(masked_paths) if masked_paths is not None else None,
                    readonly_paths=list(readonly_paths) if readonly_paths is not None
                    else None,
                    seccomp=dict(seccomp) if seccomp is not None else None,
                    readonly_root=readonly_root)
        info = SandboxInfo.from_json(self.transport.json("POST", "/v1/sandboxes",
                                                         json_body=body))
        return Sandbox(self, info.id, info)

    def get_sandbox(self, sandbox_id: str) -> "Sandbox":
        """Fetches a sandbox by id or name; NotFoundError when it does not exist,
        SandboxEndedError (a NotFoundError) when it ended (why and when)."""
        sb = Sandbox(self, sandbox_id)
        sb.refresh()
        if sb.info.id != sandbox_id:  # asked by name: the handle keeps the id
            sb = Sandbox(self, sb.info.id, sb.info)
        return sb

    def sandbox(self, sandbox_id: str) -> "Sandbox":
        """A handle on a sandbox by id, without a request."""
        return Sandbox(self, sandbox_id)

    def list_sandboxes(self, labels: Optional[Mapping[str, str]] = None,
                       all: bool = False) -> List["Sandbox"]:  # noqa: A002 - as docker ps -a
        """Sandboxes carrying every given label (all when labels is empty). all: also the
        ended ones isolad still has tombstones of (info.state "ended", end_reason, ...)."""
        q = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        if all:
            q.append(("all", "true"))
        d = self.transport.json("GET", "/v1/sandboxes", query=q)
        items = d.get("sandboxes", []) if isinstance(d, dict) else d
        return [Sandbox(self, x["id"], SandboxInfo.from_json(x)) for x in items]

    def delete_sandbox(self, sandbox_id: str) -> None:
        self.transport.json("DELETE", f"/v1/sandboxes/{seg(sandbox_id)}")

    def wait_sandbox(self, sandbox_id: str, timeout: Optional[float] = None) -> SandboxInfo:
        """Blocks until the sandbox (id or name) ends; returns its tombstone (state "ended",
        end_reason, ended_at, detail) or, for a sandbox in state error, its info. timeout:
        seconds, then TimeoutError (None = wait as long as it takes)."""
        q = {"timeout": timeout} if timeout is not None else None
        d = self.transport.json("GET", f"/v1/sandboxes/{seg(sandbox_id)}/wait", query=q,
                                timeout=FOREVER if timeout is None else timeout + 30)
        return SandboxInfo.from_json(d)

    def prune(self, states: Optional[List[str]] = None,
              older_than: Optional[float] = None) -> List[str]:
        """Removes tombstones ("ended") and destroys errored sandboxes ("error"), both by
        default, that ended / were created at least older_than seconds ago. Returns the ids."""
        d = self.transport.json("POST", "/v1/sandboxes/prune",
                                json_body=_put({}, states=states, older_than=older_than))
        return list((d or {}).get("removed", []))

    # -- snapshots and pools -------------------------------------------------------------
    def list_snapshots(self) -> List[Snapshot]:
        """The caller's named snapshots."""
        d = self.transport.json("GET", "/v1/snapshots")
        return [Snapshot.from_json(x) for x in d.get("snapshots", [])]

    def get_snapshot(self, name: str) -> Snapshot:
        return Snapshot.from_json(self.transport.json("GET", f"/v1/snapshots/{seg(name)}"))

    def delete_snapshot(self, name: str) -> None:
        """Deletes a snapshot; ConflictError while a live sandbox still maps it."""
        self.transport.json("DELETE", f"/v1/snapshots/{seg(name)}")

    def list_pools(self) -> List[Dict[str, Any]]:
        """Warm pools: template, tier, size, ready, creating, claims, misses, failures."""
        d = self.transport.json("GET", "/v1/pools")
        return d.get("pools", []) if isinstance(d, dict) else d

    def set_pool(self, template: str, tier: str, size: int) -> Dict[str, Any]:
        """Sets the number of ready sandboxes kept for (template, tier); 0 drains it.
        Operator only."""
        return self.transport.json("PUT", f"/v1/pools/{seg(template)}/{seg(tier)}",
                                   json_body={"size": int(size)})

    # -- templates ---------------------------------------------------------------------
    def list_templates(self) -> List[Template]:
        d = self.transport.json("GET", "/v1/templates")
        return [Template.from_json(t) for t in d.get("templates", [])]

    def import_template(self, name: str, source: Union[str, os.PathLike, bytes, IO[bytes]],
                        on_progress: Optional[Callable[[ImportProgress], Any]] = None,
                        timeout: float = 600.0) -> Template:
        """Imports a root filesystem tar (OCI layout or `docker save` archive) under name.
        source: a path, bytes, or a binary file object. on_progress gets each progress
        event. Raises the import's error (typed by its code)."""
        if isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                return self.import_template(name, f, on_progress, timeout)
        r = self.transport.open("POST", "/v1/templates", query={"name": name}, body=source,
                                headers={"Content-Type": "application/x-tar"}, timeout=timeout)
        return self._template_stream(r, f"template import `{name}`", on_progress)

    def pull_template(self, ref: str, name: Optional[str] = None, *,
                      username: Optional[str] = None, password: Optional[str] = None,
                      ca_pem: Optional[str] = None, plain_http: bool = False,
                      on_progress: Optional[Callable[[ImportProgress], Any]] = None,
                      timeout: float = 1800.0) -> Template:
        """Has isolad pull image ref ([registry/]repo[:tag][@sha256:hex]) from an OCI registry
        as template name (default: the repository's last component). ca_pem: PEM text of
        certificates to trust. on_progress gets each event (`download sha256:<12 hex>` per
        blob, then the import's phases). Raises the pull's error (typed by its code)."""
        body: Dict[str, Any] = {"ref": ref, "plain_http": bool(plain_http)}
        for k, v in (("name", name), ("username", username), ("password", password),
                     ("ca_pem", ca_pem)):
            if v is not None:
                body[k] = v
        r = self.transport.open("POST", "/v1/templates/pull", json_body=body, timeout=timeout)
        return self._template_stream(r, f"template pull `{ref}`", on_progress)

    def get_template(self, name: str) -> Template:
        """One template with env, binds and skipped_entries (in raw)."""
        return Template.from_json(self.transport.json("GET", f"/v1/templates/{seg(name)}"))

    @staticmethod
    def _template_stream(r, what: str, on_progress) -> Template:
        """Follows an import or pull reply's NDJSON to its template or error."""
        try:
            for ev in r.json_lines():
                t = ev.get("type")
                if t == "progress" and on_progress:
                    on_progress(ImportProgress(ev.get("phase", ""), ev.get("done", 0),
                                               ev.get("total", 0)))
                elif t == "done":
                    return Template.from_json(ev.get("template") or {})
                elif t == "error":
                    raise errors.error_for(ev.get("code"), ev.get("message") or "failed")
        finally:
            r.close()
        raise errors.ProtocolError(f"{what}: stream ended without a result")

    def delete_template(self, name: str) -> None:
        self.transport.json("DELETE", f"/v1/templates/{seg(name)}")


class Sandbox:
    """A handle on one sandbox. `info` is the last fetched state (refresh() updates it).
    Used as a context manager, the sandbox is destroyed on exit."""

    def __init__(self, client: Client, sandbox_id: str, info: Optional[SandboxInfo] = None):
        self.client = client
        self.id = sandbox_id
        self.info = info
        self.last_fork: Optional[Dict[str, Any]] = None
        self._t = client.transport
        self._base = f"/v1/sandboxes/{seg(sandbox_id)}"
        self.files = Files(self)
        self.processes = Processes(self)

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self.info.state if self.info else '?'}>"

    @property
    def state(self) -> str:
        return self.refresh().state

    def refresh(self) -> SandboxInfo:
        self.info = SandboxInfo.from_json(self._t.json("GET", self._base))
        return self.info

    def set_timeout(self, ttl: int) -> SandboxInfo:
        """Sets the sandbox to expire `ttl` seconds from now (capped by the daemon)."""
        self.info = SandboxInfo.from_json(self._t.json("POST", f"{self._base}/timeout",
                                                       json_body={"ttl": int(ttl)}))
        return self.info

    def delete(self) -> None:
        """Destroys the sandbox (any state); the id is gone afterwards."""
        self._t.json("DELETE", self._base)

    def wait(self, timeout: Optional[float] = None) -> SandboxInfo:
        """Blocks until the sandbox ends (Client.wait_sandbox); info becomes its tombstone."""
        self.info = self.client.wait_sandbox(self.id, timeout)
        return self.info

    kill = delete

    def stats(self) -> Dict[str, Any]:
        """One resource sample: cpu_seconds, memory_bytes, disk_bytes, pids, limits, ..."""
        return self._t.json("GET", f"{self._base}/stats")

    def metrics(self, start: Optional[float] = None, end: Optional[float] = None) -> Dict[str, Any]:
        """The kept samples (the last hour, one per period_s) taken in [start, end] (unix
        seconds): {period_s, max_samples, samples: [{time, cpu_seconds, memory_bytes,
        disk_bytes}]}, oldest first."""
        q = "&".join(f"{k}={v}" for k, v in (("start", start), ("end", end)) if v is not None)
        return self._t.json("GET", f"{self._base}/metrics" + (f"?{q}" if q else ""))

    # -- persistence -------------------------------------------------------------------
    def _state_change(self, op: str) -> SandboxInfo:
        self.info = SandboxInfo.from_json(self._t.json("POST", f"{self._base}/{op}"))
        return self.info

    def pause(self) -> SandboxInfo:
        """Stops every process in place (info.persistence["pause"] says what is kept)."""
        return self._state_change("pause")

    def resume(self) -> SandboxInfo:
        """Resumes a paused or hibernated sandbox."""
        return self._state_change("resume")

    def hibernate(self) -> SandboxInfo:
        """Saves the sandbox to disk and frees its resources (scale to zero)."""
        return self._state_change("hibernate")

    def snapshot(self, name: str) -> Snapshot:
        """Takes an immutable named snapshot; create_sandbox(snapshot=name) starts from it."""
        return Snapshot.from_json(self._t.json("POST", "/v1/snapshots",
                                               json_body={"sandbox": self.id, "name": name}))

    def fork(self, count: int = 1) -> List["Sandbox"]:
        """count new sandboxes with this one's state, each with a fresh identity.
        last_fork holds the whole answer (source pause time `paused_us`, `level`)."""
        d = self._t.json("POST", f"{self._base}/fork", json_body={"count": int(count)})
        self.last_fork = d
        return [Sandbox(self.client, x["id"], SandboxInfo.from_json(x))
                for x in d.get("children", [])]

    def set_lifecycle(self, *, on_timeout: Optional[str] = None,
                      idle_timeout: Optional[int] = None,
                      auto_resume: Optional[bool] = None) -> SandboxInfo:
        """Changes what happens when the TTL or the idle timeout runs out."""
        body = _put({}, on_timeout=on_timeout, idle_timeout=idle_timeout,
                    auto_resume=auto_resume)
        self.info = SandboxInfo.from_json(self._t.json("PUT", f"{self._base}/lifecycle",
                                                       json_body=body))
        return self.info

    # -- network -----------------------------------------------------------------------
    def network(self) -> Dict[str, Any]:
        """Egress policy, interface, addresses and counters."""
        return self._t.json("GET", f"{self._base}/network")

    def set_network(self, policy: Mapping[str, Any]) -> Dict[str, Any]:
        """Replaces the egress policy live."""
        return self._t.json("PUT", f"{self._base}/network", json_body=dict(policy))

    def expose(self, port: int, public: bool = False) -> Exposure:
        """Makes a port inside the sandbox reachable on the host's exposure listener."""
        return Exposure.from_json(self._t.json("POST", f"{self._base}/ports",
                                               json_body={"port": int(port),
                                                          "public": bool(public)}))

    def ports(self) -> List[Exposure]:
        d = self._t.json("GET", f"{self._base}/ports")
        return [Exposure.from_json(x) for x in d.get("ports", [])]

    def unexpose(self, port: int) -> None:
        self._t.json("DELETE", f"{self._base}/ports/{int(port)}")

    # -- code interpreter (docs/code-interpreter.md) ---------------------------------------
    def run_code(self, code: str, *, language: Optional[str] = None, context=None,
                 env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                 on_stdout=None, on_stderr=None, on_result=None,
                 on_error=None) -> "_code.Execution":
        """Runs code in the sandbox's code interpreter (started on first use) and returns
        its Execution: results with their MIME fields, logs, error. language (python by
        default, js, ts, bash) or context (a Context or its id), not both. The callbacks get
        each stdout/stderr text, Result and ExecutionError as it streams."""
        return _code.run_code(self._t, self._base, code, language=language, context=context,
                              env=dict(env) if env is not None else None, timeout=timeout,
                              on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result,
                              on_error=on_error)

    def create_code_context(self, language: Optional[str] = None,
                            cwd: Optional[str] = None) -> "_code.Context":
        """A new interpreter context whose state persists between run_code calls."""
        return _code.create_context(self._t, self._base, language, cwd)

    def list_code_contexts(self) -> List["_code.Context"]:
        return _code.list_contexts(self._t, self._base)

    def restart_code_context(self, context) -> None:
        """Restarts a context: its state is lost, its id stays."""
        _code.restart_context(self._t, self._base, context)

    def remove_code_context(self, context) -> None:
        _code.remove_context(self._t, self._base, context)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.delete()
        except errors.NotFoundError:
            pass

    # -- commands ----------------------------------------------------------------------
    def _exec_body(self, cmd, env, cwd, user, timeout, stdin, max_output,
                   narrow: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        if isinstance(stdin, bytes):
            stdin = stdin.decode()
        return _put(_cmd_fields(cmd), env=dict(env) if env is not None else None, cwd=cwd,
                    user=user, timeout=timeout, stdin=stdin, max_output=max_output,
                    **_narrow_fields(narrow))

    def exec(self, cmd: Command, *, env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None, user: Optional[str] = None,
             timeout: Optional[float] = None, stdin: Union[str, bytes, None] = None,
             max_output: Optional[int] = None, on_stdout: Optional[Callback] = None,
             on_stderr: Optional[Callback] = None,
             narrow: Optional[Mapping[str, Any]] = None) -> ExecResult:
        """Runs a command to completion. cmd: a shell line (str) or an argv list. timeout:
        seconds, after which the agent kills it (result.timed_out). With on_stdout /
        on_stderr the output streams to them as it arrives (and is also in the result).
        narrow: what only narrows the command (docs/process-tier.md, "Narrowing a
        command"): {"additional_gids": [gid...], "umask": 0o077, "rlimits": [{"type":
        "RLIMIT_NOFILE", "soft": 64, "hard": 64}], "rlimits_cap": False, "oom_score_adj":
        500}; what would widen it (a limit raised, oom_score_adj lowered) raises
        ForbiddenError (rlimits_cap=True: a limit above the sandbox's is lowered to it).
        A program that cannot be started raises (NotFoundError for a missing program)."""
        if on_stdout or on_stderr:
            with self.exec_stream(cmd, env=env, cwd=cwd, user=user, timeout=timeout,
                                  stdin=stdin, narrow=narrow) as s:
                for ev in s:
                    if ev.type == "stdout" and on_stdout:
                        on_stdout(ev.data)
                    elif ev.type == "stderr" and on_stderr:
                        on_stderr(ev.data)
                return s.result()
        body = self._exec_body(cmd, env, cwd, user, timeout, stdin, max_output, narrow)
        return ExecResult.from_json(self._t.json("POST", f"{self._base}/exec", json_body=body,
                                                 timeout=_http_timeout(timeout)))

    def exec_stream(self, cmd: Command, *, env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None,
                    timeout: Optional[float] = None,
                    stdin: Union[str, bytes, None] = None,
                    narrow: Optional[Mapping[str, Any]] = None) -> "EventStream":
        """Runs a command and returns an iterator of its events (start, stdout, stderr,
        dropped, exit). Closing the stream early leaves the command running as a background
        process."""
        body = self._exec_body(cmd, env, cwd, user, timeout, stdin, None, narrow)
        r = self._t.open("POST", f"{self._base}/exec", query={"stream": "ndjson"},
                         json_body=body, headers={"Accept": "application/x-ndjson"},
                         timeout=_http_timeout(timeout))
        return EventStream(r)

    def attach(self, pid: int, timeout: float = 30.0) -> PtySession:
        """Attaches to a process over WebSocket (see PtySession)."""
        return self.processes.attach(pid, timeout)

    def pty(self, cmd: Command = "/bin/sh", *, cols: int = 80, rows: int = 24,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
            user: Optional[str] = None) -> PtySession:
        """Starts cmd on a terminal and attaches to it."""
        p = self.processes.start(cmd, tty=True, cols=cols, rows=rows, env=env, cwd=cwd,
                                 user=user)
        return self.processes.attach(p.pid)


class EventStream:
    """Events of an exec or output stream, as an iterator. After the iteration, result()
    is the finished command (ExecResult) and `exit` its exit event. An `error` event
    raises its typed error. Use as a context manager or close() it."""

    def __init__(self, reply):
        self._r = reply
        self._lines = reply.json_lines()
        self.events: List[Event] = []
        self.exit: Optional[ExitStatus] = None
        self.pid: Optional[int] = None
        self._stdout: List[bytes] = []
        self._stderr: List[bytes] = []
        self.dropped = 0

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            d = next(self._lines)
        except socket.timeout:
            self.close()
            raise errors.TimeoutError("no event from isolad within the timeout",
                                      "timeout") from None
        except StopIteration:
            self.close()
            raise
        ev = Event.from_json(d)
        self.events.append(ev)
        if ev.type == "start":
            self.pid = ev.pid
        elif ev.type == "stdout":
            self._stdout.append(ev.data)
        elif ev.type == "stderr":
            self._stderr.append(ev.data)
        elif ev.type == "dropped":
            self.dropped += ev.bytes
        elif ev.type == "exit":
            self.exit = ev.exit
        elif ev.type == "error":
            self.close()
            raise errors.error_for(ev.code, ev.message or "error event from isolad")
        return ev

    def read_all(self) -> List[Event]:
        for _ in self:
            pass
        return self.events

    def result(self) -> ExecResult:
        """Reads to the end; the output collected and the exit."""
        self.read_all()
        if self.exit is None:
            raise errors.ProtocolError("event stream ended without an exit event")
        out, err = b"".join(self._stdout), b"".join(self._stderr)
        e = self.exit
        return ExecResult(stdout=out.decode("utf-8", "replace"),
                          stderr=err.decode("utf-8", "replace"), exit_code=e.exit_code,
                          signal=e.signal, timed_out=e.timed_out, oom_killed=e.oom_killed,
                          duration_ms=e.duration_ms, stdout_bytes=len(out),
                          stderr_bytes=len(err), stdout_raw=out, stderr_raw=err)

    def close(self) -> None:
        self._r.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Processes:
    """Background processes of a sandbox (POST/GET .../processes...)."""

    def __init__(self, sb: Sandbox):
        self._sb = sb
        self._t = sb._t
        self._base = f"{sb._base}/processes"

    def start(self, cmd: Command, *, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None, user: Optional[str] = None, tty: bool = False,
              cols: Optional[int] = None, rows: Optional[int] = None,
              timeout: Optional[float] = None, tag: Optional[str] = None,
              narrow: Optional[Mapping[str, Any]] = None) -> Process:
        """Starts a background process; narrow as Sandbox.exec's."""
        body = _put(_cmd_fields(cmd), env=dict(env) if env is not None else None, cwd=cwd,
                    user=user, tty=tty or None, cols=cols, rows=rows, timeout=timeout, tag=tag,
                    **_narrow_fields(narrow))
        return Process.from_json(self._t.json("POST", self._base, json_body=body))

    def list(self) -> List[Process]:
        """Running processes and up to 256 exited ones, newest first."""
        d = self._t.json("GET", self._base)
        return [Process.from_json(p) for p in d.get("processes", [])]

    def get(self, pid: int) -> Process:
        return Process.from_json(self._t.json("GET", f"{self._base}/{int(pid)}"))

    def output(self, pid: int) -> OutputResult:
        """The buffered output (the last `retention` bytes of each stream)."""
        return OutputResult.from_json(self._t.json("GET", f"{self._base}/{int(pid)}/output"))

    def stream(self, pid: int, follow: bool = True,
               timeout: Optional[float] = None) -> EventStream:
        """The buffered output as events, then (follow) live output until exit. timeout
        bounds each wait for the next event (None: the client's timeout)."""
        r = self._t.open("GET", f"{self._base}/{int(pid)}/output",
                         query={"follow": follow, "stream": "ndjson"},
                         headers={"Accept": "application/x-ndjson"}, timeout=timeout)
        return EventStream(r)

    def write_stdin(self, pid: int, data: Union[bytes, str, IO[bytes], Iterable[bytes]],
                    close: bool = False) -> int:
        """Writes data to the process's stdin (streamed); returns the bytes written."""
        d = self._t.json("POST", f"{self._base}/{int(pid)}/stdin",
                         query={"close": True} if close else None, body=data,
                         headers={"Content-Type": "application/octet-stream"})
        return int(d.get("bytes", 0)) if d else 0

    def close_stdin(self, pid: int) -> None:
        self._t.json("POST", f"{self._base}/{int(pid)}/close-stdin")

    def signal(self, pid: int, sig: Union[int, str] = "TERM") -> None:
        """Sends a signal: a number or a name ("TERM", "SIGKILL")."""
        self._t.json("POST", f"{self._base}/{int(pid)}/signal", json_body={"signal": sig})

    kill = signal

    def resize(self, pid: int, cols: int, rows: int) -> None:
        self._t.json("POST", f"{self._base}/{int(pid)}/resize",
                     json_body={"cols": int(cols), "rows": int(rows)})

    def wait(self, pid: int, timeout: Optional[float] = None) -> ExitStatus:
        """Waits for the process to exit; TimeoutError (504) when still running after
        timeout seconds (None: until it exits)."""
        d = self._t.json("POST", f"{self._base}/{int(pid)}/wait",
                         query={"timeout": timeout} if timeout is not None else None,
                         timeout=_http_timeout(timeout))
        return ExitStatus.from_json(d)

    def attach(self, pid: int, timeout: float = 30.0) -> PtySession:
        """A WebSocket session on the process: replayed tail, then live output."""
        return PtySession(WebSocket.connect(self._t, f"{self._base}/{int(pid)}/ws", timeout))


class Files:
    """Files of a sandbox, resolved inside it by its agent as the sandbox user."""

    def __init__(self, sb: Sandbox):
        self._sb = sb
        self._t = sb._t
        self._base = sb._base

    def read(self, path: str, offset: Optional[int] = None,
             length: Optional[int] = None) -> bytes:
        """The file's bytes, or length bytes from offset (an HTTP Range). offset alone reads
        to the end; length alone (offset None) reads the last length bytes."""
        h = {}
        if offset is not None or length is not None:
            if offset is None:
                h["Range"] = f"bytes=-{int(length)}"
            elif length is None:
                h["Range"] = f"bytes={int(offset)}-"
            elif length <= 0:
                return b""
            else:
                h["Range"] = f"bytes={int(offset)}-{int(offset) + int(length) - 1}"
        with self._t.open("GET", f"{self._base}/files", query={"path": path}, headers=h) as r:
            return r.read_all()

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def read_to(self, path: str, out: IO[bytes]) -> int:
        """Streams the file into a binary file object; returns the bytes copied."""
        n = 0
        with self._t.open("GET", f"{self._base}/files", query={"path": path}) as r:
            for chunk in r.chunks():
                out.write(chunk)
                n += len(chunk)
        return n

    def write(self, path: str, data: Union[bytes, str, IO[bytes], Iterable[bytes]],
              mode: Union[int, str, None] = None) -> Entry:
        """Creates or replaces a file atomically (parents must exist). data: bytes, str,
        a binary file object or an iterable of bytes (streamed). mode: 0o644 or "644"."""
        if isinstance(mode, int):
            mode = format(mode, "o")
        d = self._t.json("PUT", f"{self._base}/files", query={"path": path, "mode": mode},
                         body=data, headers={"Content-Type": "application/octet-stream"})
        return Entry.from_json(d or {"name": os.path.basename(path), "type": "file",
                                     "path": path})

    def list(self, path: str, depth: int = 1) -> Listing:
        d = self._t.json("GET", f"{self._base}/fs/list", query={"path": path, "depth": depth})
        return Listing([Entry.from_json(e) for e in d.get("entries", [])],
                       bool(d.get("truncated")))

    def stat(self, path: str) -> Entry:
        """The entry (symlinks not followed); NotFoundError when missing."""
        return Entry.from_json(self._t.json("GET", f"{self._base}/fs/stat",
                                            query={"path": path}))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except errors.NotFoundError:
            return False

    def mkdir(self, path: str, parents: bool = False,
              mode: Union[int, str, None] = None) -> Entry:
        body = _put({"path": path, "parents": parents},
                    mode=format(mode, "o") if isinstance(mode, int) else mode)
        return Entry.from_json(self._t.json("POST", f"{self._base}/fs/mkdir", json_body=body))

    def rename(self, src: str, dst: str, overwrite: bool = False) -> Entry:
        return Entry.from_json(self._t.json("POST", f"{self._base}/fs/rename",
                                            json_body={"from": src, "to": dst,
                                                       "overwrite": overwrite}))

    move = rename

    def remove(self, path: str, recursive: bool = False) -> None:
        self._t.json("POST", f"{self._base}/fs/remove",
                     json_body={"path": path, "recursive": recursive})

    # -- archives ------------------------------------------------------------------------
    def upload_archive(self, path: str, tar: Union[bytes, IO[bytes], Iterable[bytes]]
                       ) -> ArchiveResult:
        """Extracts a tar (optionally compressed) under the directory `path`."""
        d = self._t.json("PUT", f"{self._base}/archive", query={"path": path}, body=tar,
                         headers={"Content-Type": "application/x-tar"})
        return ArchiveResult(int(d.get("entries", 0)), int(d.get("bytes", 0)))

    def download_archive(self, path: str, out: Optional[IO[bytes]] = None) -> Optional[bytes]:
        """The tar of a file or tree (names start with the basename of path). Written to
        out when given (returns None), else returned as bytes."""
        with self._t.open("GET", f"{self._base}/archive", query={"path": path},
                          headers={"Accept": "application/x-tar"}) as r:
            if out is None:
                return r.read_all()
            for chunk in r.chunks():
                out.write(chunk)
        return None

    def upload_dir(self, local_dir: Union[str, os.PathLike], path: str) -> ArchiveResult:
        """Copies a local directory's contents into the sandbox directory `path` (which
        must exist). Symlinks are stored, not followed."""
        local_dir = os.fspath(local_dir)
        if not os.path.isdir(local_dir):
            raise NotADirectoryError(local_dir)
        with tempfile.TemporaryFile() as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name in sorted(os.listdir(local_dir)):
                    tar.add(os.path.join(local_dir, name), arcname=name, recursive=True)
            spool.seek(0)
            return self.upload_archive(path, spool)

    def download_dir(self, path: str, local_dir: Union[str, os.PathLike]) -> List[str]:
        """Copies the sandbox directory `path` into local_dir (created if missing): its
        contents land directly in local_dir, merged with what is there. Returns the extracted
        names. The archive is untrusted: absolute names, `..`, hard links to anything but a
        file of the archive itself raise ProtocolError; nothing is written through a link;
        devices and fifos are skipped; owners and setuid bits are not restored. The archive
        is extracted into a temporary directory beside local_dir and merged only once it was
        read completely: a broken download (ProtocolError "reply from isolad broke off") or
        a refused archive leaves local_dir as it was."""
        local_dir = os.path.abspath(os.fspath(local_dir))
        parent = os.path.dirname(local_dir)
        os.makedirs(parent, exist_ok=True)
        with tempfile.TemporaryFile() as spool:
            self.download_archive(path, spool)
            spool.seek(0)
            tmp = tempfile.mkdtemp(prefix=".isola-dl-", dir=parent)
            try:
                with tarfile.open(fileobj=spool, mode="r:") as tar:
                    names, dirmodes = _extract.extract(tar, tmp)
                os.makedirs(local_dir, exist_ok=True)
                _extract.merge(tmp, local_dir)
                _extract.fix_dir_modes(local_dir, dirmodes)
            except tarfile.TarError as e:
                raise errors.ProtocolError(f"archive of `{path}` is malformed: {e}") from e
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return names
