// SPDX-License-Identifier: Apache-2.0
// The isola client: sandboxes, commands, processes, files, archives, templates.

import { promises as fs } from "node:fs";
import type { IncomingMessage } from "node:http";
import * as path from "node:path";
import { Readable } from "node:stream";
import { IsolaError, NotFoundError, ProtocolError, errorFor } from "./errors.js";
import { type Body, type ClientOptions, Transport, jsonLines, readAll, seg } from "./http.js";
import { extractInto, fixDirModes, merge } from "./extract.js";
import { packDir, unpack } from "./tar.js";
import * as code from "./code.js";
import type {
  ArchiveResult,
  Command,
  CreateSandboxOptions,
  Entry,
  ExecEvent,
  ExecOptions,
  ExecResult,
  ExitStatus,
  Exposure,
  ForkResult,
  Health,
  ImportProgress,
  LifecycleOptions,
  Listing,
  NetworkPolicy,
  OutputResult,
  Pool,
  ProcessInfo,
  ProcessStartOptions,
  SandboxInfo,
  Signal,
  Snapshot,
  Template,
} from "./types.js";
import { PtySession, WebSocketClient } from "./ws.js";

/** Slack added to a command's own timeout for the HTTP inactivity timeout (ms). */
const SLACK_MS = 30000;

function cmdFields(cmd: Command): Record<string, unknown> {
  if (typeof cmd === "string") return { command: cmd };
  if (!Array.isArray(cmd) || cmd.length === 0) throw new TypeError("empty command");
  return { cmd: cmd.map(String) };
}

function defined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

/** The inactivity timeout of a call that lasts as long as a command. */
function cmdTimeout(seconds?: number): number {
  return seconds ? seconds * 1000 + SLACK_MS : 0;
}

/** One isolad endpoint. `new Client()` reads ISOLA_URL / ISOLA_SOCKET / ISOLA_TOKEN like
 * the CLI (default socket /run/isola/isolad.sock). */
export class Client {
  readonly transport: Transport;

  constructor(opts: ClientOptions = {}) {
    this.transport = new Transport(opts);
  }

  health(): Promise<Health> {
    return this.transport.json("GET", "/v1/health");
  }

  /** The host capability report (one object per check). */
  doctor(): Promise<Record<string, any>> {
    return this.transport.json("GET", "/v1/doctor");
  }

  /** The caller as isolad resolved it: {who, tenant, role}. */
  whoami(): Promise<{ who: string; tenant: string; role: string }> {
    return this.transport.json("GET", "/v1/whoami");
  }

  /** Prometheus metrics (text format 0.0.4). */
  async metrics(): Promise<string> {
    return (await readAll(await this.transport.request("GET", "/metrics"))).toString("utf8");
  }

  /** This installation's compliance posture as evidence (operator). */
  compliance(): Promise<Record<string, any>> {
    return this.transport.json("GET", "/v1/compliance");
  }

  /** Creates an API token; the secret is in the reply's `token`, shown only once. */
  createToken(opts: { tenant?: string; role?: "admin" | "user" | "read-only"; name?: string } = {}): Promise<Record<string, any>> {
    return this.transport.json("POST", "/v1/tokens", { json: defined({ ...opts }) });
  }

  /** Token inventory (never secrets). */
  async listTokens(tenant?: string): Promise<Record<string, any>[]> {
    return (await this.transport.json("GET", "/v1/tokens", { query: { tenant } }))?.tokens ?? [];
  }

  async revokeToken(id: string): Promise<void> {
    await this.transport.json("DELETE", `/v1/tokens/${seg(id)}`);
  }

  /** Creates a tenant; quota fields as in the API (max_sandboxes, max_cpu, ...). */
  createTenant(name: string, quota: Record<string, unknown> = {}): Promise<Record<string, any>> {
    return this.transport.json("POST", "/v1/tenants", { json: { ...quota, name } });
  }

  async listTenants(): Promise<Record<string, any>[]> {
    return (await this.transport.json("GET", "/v1/tenants"))?.tenants ?? [];
  }

  getTenant(name: string): Promise<Record<string, any>> {
    return this.transport.json("GET", `/v1/tenants/${seg(name)}`);
  }

  /** Changes a tenant's quotas; fields not given keep their value. */
  updateTenant(name: string, quota: Record<string, unknown>): Promise<Record<string, any>> {
    return this.transport.json("PUT", `/v1/tenants/${seg(name)}`, { json: quota });
  }

  async deleteTenant(name: string): Promise<void> {
    await this.transport.json("DELETE", `/v1/tenants/${seg(name)}`);
  }

  /** Checks the audit trail: {ok, records, segments, sealed, ..., problems}. */
  auditVerify(): Promise<Record<string, any>> {
    return this.transport.json("GET", "/v1/audit/verify");
  }

  /** Audit records, one object per JSON line (streamed). */
  async *auditExport(since?: string): AsyncGenerator<Record<string, any>> {
    yield* jsonLines(await this.transport.request("GET", "/v1/audit/export", { query: { since } }));
  }

  async auditSeal(): Promise<Record<string, any>> {
    return (await this.transport.json("POST", "/v1/audit/seal")) ?? {};
  }

  auditPrune(maxAge?: number): Promise<Record<string, any>> {
    return this.transport.json("POST", "/v1/audit/prune", { json: defined({ max_age: maxAge }) });
  }

  /** Creates and starts a sandbox (POST /v1/sandboxes). */
  async createSandbox(opts: CreateSandboxOptions = {}): Promise<Sandbox> {
    const info = await this.transport.json<SandboxInfo>("POST", "/v1/sandboxes", { json: defined({ ...opts }) });
    return new Sandbox(this, info.id, info);
  }

  /** Fetches a sandbox by id or name; NotFoundError when it does not exist, SandboxEndedError
   * (a NotFoundError) when it ended (why and when). */
  async getSandbox(id: string): Promise<Sandbox> {
    const sb = new Sandbox(this, id);
    const info = await sb.refresh();
    return info.id === id ? sb : new Sandbox(this, info.id, info); // by name: keep the id
  }

  /** A handle on a sandbox by id, without a request. */
  sandbox(id: string): Sandbox {
    return new Sandbox(this, id);
  }

  /** Sandboxes carrying every given label. all: also the ended ones isolad still has
   * tombstones of (info.state "ended", end_reason, ended_at, detail). */
  async listSandboxes(labels: Record<string, string> = {}, opts: { all?: boolean } = {}): Promise<Sandbox[]> {
    const query = Object.entries(labels).map(([k, v]) => ["label", `${k}=${v}`] as [string, string]);
    if (opts.all) query.push(["all", "true"]);
    const d = await this.transport.json<{ sandboxes: SandboxInfo[] }>("GET", "/v1/sandboxes", { query });
    return (d?.sandboxes ?? []).map((s) => new Sandbox(this, s.id, s));
  }

  async deleteSandbox(id: string): Promise<void> {
    await this.transport.json("DELETE", `/v1/sandboxes/${seg(id)}`);
  }

  /** Blocks until the sandbox (id or name) ends; resolves to its tombstone (state "ended",
   * end_reason, ended_at, detail) or, for a sandbox in state error, its info. timeout:
   * seconds, then TimeoutError (undefined = as long as it takes). */
  async waitSandbox(id: string, timeout?: number): Promise<SandboxInfo> {
    return this.transport.json<SandboxInfo>("GET", `/v1/sandboxes/${seg(id)}/wait`, {
      query: timeout === undefined ? undefined : { timeout },
      timeout: 0,
    });
  }

  /** Removes tombstones ("ended") and destroys errored sandboxes ("error"), both by default,
   * that ended / were created at least olderThan seconds ago. Resolves to the ids removed. */
  async prune(opts: { states?: ("ended" | "error")[]; olderThan?: number } = {}): Promise<string[]> {
    const d = await this.transport.json<{ removed: string[] }>("POST", "/v1/sandboxes/prune", {
      json: defined({ states: opts.states, older_than: opts.olderThan }),
    });
    return d?.removed ?? [];
  }

  /** The caller's named snapshots. */
  async listSnapshots(): Promise<Snapshot[]> {
    const d = await this.transport.json<{ snapshots: Snapshot[] }>("GET", "/v1/snapshots");
    return d?.snapshots ?? [];
  }

  getSnapshot(name: string): Promise<Snapshot> {
    return this.transport.json<Snapshot>("GET", `/v1/snapshots/${seg(name)}`);
  }

  /** Deletes a snapshot; ConflictError while a live sandbox still maps it. */
  async deleteSnapshot(name: string): Promise<void> {
    await this.transport.json("DELETE", `/v1/snapshots/${seg(name)}`);
  }

  /** Warm pools: size, ready, creating, claims, misses per (template, tier). */
  async listPools(): Promise<Pool[]> {
    const d = await this.transport.json<{ pools: Pool[] }>("GET", "/v1/pools");
    return d?.pools ?? [];
  }

  /** Keeps `size` ready sandboxes for (template, tier); 0 drains it. Operator only. */
  setPool(template: string, tier: string, size: number): Promise<Pool> {
    return this.transport.json<Pool>("PUT", `/v1/pools/${seg(template)}/${seg(tier)}`, { json: { size } });
  }

  async listTemplates(): Promise<Template[]> {
    const d = await this.transport.json<{ templates: Template[] }>("GET", "/v1/templates");
    return d?.templates ?? [];
  }

  /** Imports a root filesystem tar (OCI layout or `docker save` archive) under name.
   * source: a file path, a Buffer or a Readable. onProgress gets each progress event. */
  async importTemplate(
    name: string,
    source: string | Buffer | Uint8Array | Readable,
    opts: { onProgress?: (p: ImportProgress) => void; timeoutMs?: number } = {},
  ): Promise<Template> {
    let body: Body = source;
    let fh: fs.FileHandle | undefined;
    const headers: Record<string, string> = { "Content-Type": "application/x-tar" };
    if (typeof source === "string") {
      fh = await fs.open(source, "r");
      headers["Content-Length"] = String((await fh.stat()).size);
      body = fh.createReadStream();
    }
    try {
      const res = await this.transport.request("POST", "/v1/templates", {
        query: { name },
        body,
        headers,
        timeout: opts.timeoutMs ?? 600000,
      });
      for await (const ev of jsonLines(res)) {
        if (ev.type === "progress") opts.onProgress?.({ phase: ev.phase, done: ev.done, total: ev.total });
        else if (ev.type === "done") return (ev.template ?? { name }) as Template;
        else if (ev.type === "error") throw errorFor(ev.code, ev.message ?? "import failed");
      }
      throw new ProtocolError(`template import \`${name}\`: stream ended without a result`);
    } finally {
      await fh?.close().catch(() => {});
    }
  }

  async deleteTemplate(name: string): Promise<void> {
    await this.transport.json("DELETE", `/v1/templates/${seg(name)}`);
  }
}

/** A handle on one sandbox; `info` is the last fetched state. */
export class Sandbox {
  readonly files: Files;
  readonly processes: Processes;
  /** @internal */ readonly base: string;
  /** @internal */ readonly t: Transport;

  constructor(readonly client: Client, readonly id: string, public info?: SandboxInfo) {
    this.t = client.transport;
    this.base = `/v1/sandboxes/${seg(id)}`;
    this.files = new Files(this);
    this.processes = new Processes(this);
  }

  async refresh(): Promise<SandboxInfo> {
    this.info = await this.t.json<SandboxInfo>("GET", this.base);
    return this.info;
  }

  /** Sets the sandbox to expire ttl seconds from now (capped by the daemon). */
  async setTimeout(ttl: number): Promise<SandboxInfo> {
    this.info = await this.t.json<SandboxInfo>("POST", `${this.base}/timeout`, { json: { ttl } });
    return this.info;
  }

  /** Destroys the sandbox (any state); the id is gone afterwards. */
  async delete(): Promise<void> {
    await this.t.json("DELETE", this.base);
  }

  /** Blocks until the sandbox ends (Client.waitSandbox); info becomes its tombstone. */
  async wait(timeout?: number): Promise<SandboxInfo> {
    this.info = await this.client.waitSandbox(this.id, timeout);
    return this.info;
  }

  private async stateChange(op: string): Promise<SandboxInfo> {
    this.info = await this.t.json<SandboxInfo>("POST", `${this.base}/${op}`);
    return this.info;
  }

  /** Stops every process in place (info.persistence.pause says what is kept). */
  pause(): Promise<SandboxInfo> {
    return this.stateChange("pause");
  }

  /** Resumes a paused or hibernated sandbox. */
  resume(): Promise<SandboxInfo> {
    return this.stateChange("resume");
  }

  /** Saves the sandbox to disk and frees its resources (scale to zero). */
  hibernate(): Promise<SandboxInfo> {
    return this.stateChange("hibernate");
  }

  /** An immutable named snapshot; createSandbox({ snapshot: name }) starts from it. */
  snapshot(name: string): Promise<Snapshot> {
    return this.client.transport.json<Snapshot>("POST", "/v1/snapshots", { json: { sandbox: this.id, name } });
  }

  /** count new sandboxes with this one's state, each with a fresh identity. */
  async fork(count = 1): Promise<{ children: Sandbox[]; result: ForkResult }> {
    const result = await this.t.json<ForkResult>("POST", `${this.base}/fork`, { json: { count } });
    return { children: (result?.children ?? []).map((c) => new Sandbox(this.client, c.id, c)), result };
  }

  /** Changes what happens when the TTL or the idle timeout runs out. */
  async setLifecycle(opts: LifecycleOptions): Promise<SandboxInfo> {
    this.info = await this.t.json<SandboxInfo>("PUT", `${this.base}/lifecycle`, { json: defined({ ...opts }) });
    return this.info;
  }

  /** Egress policy, interface, addresses and counters. */
  network(): Promise<Record<string, any>> {
    return this.t.json("GET", `${this.base}/network`);
  }

  /** Replaces the egress policy live. */
  setNetwork(policy: NetworkPolicy): Promise<Record<string, any>> {
    return this.t.json("PUT", `${this.base}/network`, { json: policy as Record<string, unknown> });
  }

  /** Makes a port inside the sandbox reachable on the host's exposure listener. */
  expose(port: number, opts: { public?: boolean } = {}): Promise<Exposure> {
    return this.t.json<Exposure>("POST", `${this.base}/ports`, { json: { port, public: opts.public ?? false } });
  }

  async ports(): Promise<Exposure[]> {
    const d = await this.t.json<{ ports: Exposure[] }>("GET", `${this.base}/ports`);
    return d?.ports ?? [];
  }

  async unexpose(port: number): Promise<void> {
    await this.t.json("DELETE", `${this.base}/ports/${port}`);
  }

  /** Runs code in the sandbox's code interpreter (started on first use): results with their
   * MIME fields, logs and error (docs/code-interpreter.md). The callbacks get each piece as it
   * streams. A template without Python rejects with DependencyError. */
  runCode(source: string, opts: code.RunCodeOptions = {}): Promise<code.Execution> {
    return code.runCode(this.t, this.base, source, opts);
  }

  /** A new interpreter context whose state persists between runCode calls. */
  createCodeContext(opts: { language?: string; cwd?: string } = {}): Promise<code.CodeContext> {
    return code.createCodeContext(this.t, this.base, opts);
  }

  listCodeContexts(): Promise<code.CodeContext[]> {
    return code.listCodeContexts(this.t, this.base);
  }

  /** Restarts a context: its state is lost, its id stays. */
  restartCodeContext(c: code.CodeContext | string): Promise<void> {
    return code.restartCodeContext(this.t, this.base, c);
  }

  removeCodeContext(c: code.CodeContext | string): Promise<void> {
    return code.removeCodeContext(this.t, this.base, c);
  }

  /** One resource sample: cpu_seconds, memory_bytes, disk_bytes, pids, limits, ... */
  stats(): Promise<Record<string, any>> {
    return this.t.json("GET", `${this.base}/stats`);
  }

  /** Runs a command to completion. With onStdout/onStderr the output streams to them as it
   * arrives (and is also in the result). A program that cannot be started rejects
   * (NotFoundError for a missing program). */
  async exec(cmd: Command, opts: ExecOptions = {}): Promise<ExecResult> {
    if (opts.onStdout || opts.onStderr) {
      const s = await this.execStream(cmd, opts);
      try {
        for await (const ev of s) {
          if (ev.type === "stdout") opts.onStdout?.(ev.data);
          else if (ev.type === "stderr") opts.onStderr?.(ev.data);
        }
        return s.result();
      } finally {
        s.close();
      }
    }
    const body = defined({
      ...cmdFields(cmd),
      env: opts.env,
      cwd: opts.cwd,
      user: opts.user,
      timeout: opts.timeout,
      stdin: opts.stdin,
      max_output: opts.maxOutput,
      ...opts.narrow,
    });
    return this.t.json<ExecResult>("POST", `${this.base}/exec`, { json: body, timeout: cmdTimeout(opts.timeout) });
  }

  /** Runs a command and returns its events as an async iterator (start, stdout, stderr,
   * dropped, exit). Closing early leaves the command running as a background process. */
  async execStream(cmd: Command, opts: Omit<ExecOptions, "onStdout" | "onStderr" | "maxOutput"> = {}): Promise<EventStream> {
    const body = defined({ ...cmdFields(cmd), env: opts.env, cwd: opts.cwd, user: opts.user, timeout: opts.timeout, stdin: opts.stdin, ...opts.narrow });
    const res = await this.t.request("POST", `${this.base}/exec`, {
      query: { stream: "ndjson" },
      json: body,
      headers: { Accept: "application/x-ndjson" },
      timeout: cmdTimeout(opts.timeout),
    });
    return new EventStream(res);
  }

  /** Attaches to a process over WebSocket. */
  attach(pid: number, timeoutMs = 30000): Promise<PtySession> {
    return this.processes.attach(pid, timeoutMs);
  }

  /** Starts cmd on a terminal and attaches to it. */
  async pty(cmd: Command = "/bin/sh", opts: Omit<ProcessStartOptions, "tty"> = {}): Promise<PtySession> {
    const p = await this.processes.start(cmd, { ...opts, tty: true });
    return this.processes.attach(p.pid);
  }
}

/** Events of an exec or output stream. After iterating, result() is the finished command.
 * An `error` event throws its typed error. */
export class EventStream implements AsyncIterable<ExecEvent> {
  readonly events: ExecEvent[] = [];
  pid?: number;
  exit?: ExitStatus;
  dropped = 0;
  private stdout: Buffer[] = [];
  private stderr: Buffer[] = [];
  private done = false;

  constructor(private readonly res: IncomingMessage) {}

  async *[Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
    if (this.done) return;
    try {
      for await (const d of jsonLines(this.res)) {
        const ev = toEvent(d);
        this.events.push(ev);
        switch (ev.type) {
          case "start":
            this.pid = ev.pid;
            break;
          case "stdout":
            this.stdout.push(ev.data);
            break;
          case "stderr":
            this.stderr.push(ev.data);
            break;
          case "dropped":
            this.dropped += ev.bytes;
            break;
          case "exit":
            this.exit = ev;
            break;
          case "error":
            throw errorFor(ev.code, ev.message || "error event from isolad");
        }
        yield ev;
      }
    } finally {
      this.done = true;
      this.res.destroy();
    }
  }

  /** Reads to the end; the output collected and the exit. */
  async result(): Promise<ExecResult> {
    for await (const _ of this) {
      /* drain */
    }
    if (!this.exit) throw new ProtocolError("event stream ended without an exit event");
    const out = Buffer.concat(this.stdout), err = Buffer.concat(this.stderr);
    const { type: _t, ...exit } = this.exit as ExitStatus & { type?: string };
    return {
      ...exit,
      stdout: out.toString("utf8"),
      stderr: err.toString("utf8"),
      stdout_truncated: false,
      stderr_truncated: false,
      stdout_bytes: out.length,
      stderr_bytes: err.length,
    };
  }

  /** The raw bytes seen so far on a stream. */
  bytes(stream: "stdout" | "stderr"): Buffer {
    return Buffer.concat(stream === "stdout" ? this.stdout : this.stderr);
  }

  close(): void {
    this.done = true;
    this.res.destroy();
  }
}

function toEvent(d: Record<string, any>): ExecEvent {
  if (d.type === "stdout" || d.type === "stderr") return { type: d.type, data: Buffer.from(d.data ?? "", "base64") };
  return d as ExecEvent;
}

/** Background processes of a sandbox. */
export class Processes {
  private readonly base: string;
  private readonly t: Transport;

  constructor(sb: Sandbox) {
    this.t = sb.t;
    this.base = `${sb.base}/processes`;
  }

  start(cmd: Command, opts: ProcessStartOptions = {}): Promise<ProcessInfo> {
    const { narrow, ...rest } = opts;
    return this.t.json("POST", this.base, { json: defined({ ...cmdFields(cmd), ...rest, ...narrow, tty: opts.tty || undefined }) });
  }

  /** Running processes and up to 256 exited ones, newest first. */
  async list(): Promise<ProcessInfo[]> {
    return (await this.t.json<{ processes: ProcessInfo[] }>("GET", this.base))?.processes ?? [];
  }

  get(pid: number): Promise<ProcessInfo> {
    return this.t.json("GET", `${this.base}/${pid | 0}`);
  }

  /** The buffered output (the last `retention` bytes of each stream). */
  output(pid: number): Promise<OutputResult> {
    return this.t.json("GET", `${this.base}/${pid | 0}/output`);
  }

  /** The buffered output as events, then (follow) live output until exit. timeoutMs bounds
   * each wait for data (0 = none). */
  async stream(pid: number, opts: { follow?: boolean; timeoutMs?: number } = {}): Promise<EventStream> {
    const res = await this.t.request("GET", `${this.base}/${pid | 0}/output`, {
      query: { follow: opts.follow ?? true, stream: "ndjson" },
      headers: { Accept: "application/x-ndjson" },
      timeout: opts.timeoutMs,
    });
    return new EventStream(res);
  }

  /** Writes to the process's stdin (streamed); resolves with the bytes written. */
  async writeStdin(pid: number, data: Body, opts: { close?: boolean } = {}): Promise<number> {
    const d = await this.t.json<{ bytes: number }>("POST", `${this.base}/${pid | 0}/stdin`, {
      query: opts.close ? { close: true } : undefined,
      body: data,
      headers: { "Content-Type": "application/octet-stream" },
    });
    return d?.bytes ?? 0;
  }

  async closeStdin(pid: number): Promise<void> {
    await this.t.json("POST", `${this.base}/${pid | 0}/close-stdin`);
  }

  /** Sends a signal: a number or a name ("TERM", "SIGKILL"). */
  async signal(pid: number, sig: Signal = "TERM"): Promise<void> {
    await this.t.json("POST", `${this.base}/${pid | 0}/signal`, { json: { signal: sig } });
  }

  async resize(pid: number, cols: number, rows: number): Promise<void> {
    await this.t.json("POST", `${this.base}/${pid | 0}/resize`, { json: { cols, rows } });
  }

  /** Waits for exit; TimeoutError (504) when still running after timeout seconds. */
  wait(pid: number, timeout?: number): Promise<ExitStatus> {
    return this.t.json("POST", `${this.base}/${pid | 0}/wait`, {
      query: timeout !== undefined ? { timeout } : undefined,
      timeout: cmdTimeout(timeout),
    });
  }

  /** A WebSocket session on the process: the replayed tail, then live output. */
  async attach(pid: number, timeoutMs = 30000): Promise<PtySession> {
    return new PtySession(await WebSocketClient.connect(this.t, `${this.base}/${pid | 0}/ws`, timeoutMs));
  }
}

/** Files of a sandbox, resolved inside it by its agent as the sandbox user. */
export class Files {
  private readonly base: string;
  private readonly t: Transport;

  constructor(sb: Sandbox) {
    this.t = sb.t;
    this.base = sb.base;
  }

  /** The file's bytes, or `length` bytes from `offset` (an HTTP Range; offset alone reads
   * to the end, length alone the last length bytes). */
  async read(p: string, range: { offset?: number; length?: number } = {}): Promise<Buffer> {
    const headers: Record<string, string> = {};
    const { offset, length } = range;
    if (offset !== undefined || length !== undefined) {
      if (offset === undefined) headers.Range = `bytes=-${length}`;
      else if (length === undefined) headers.Range = `bytes=${offset}-`;
      else if (length <= 0) return Buffer.alloc(0);
      else headers.Range = `bytes=${offset}-${offset + length - 1}`;
    }
    const res = await this.t.request("GET", `${this.base}/files`, { query: { path: p }, headers });
    return readAll(res, Number.MAX_SAFE_INTEGER);
  }

  async readText(p: string): Promise<string> {
    return (await this.read(p)).toString("utf8");
  }

  /** The file as a stream (for large files). */
  readStream(p: string): Promise<IncomingMessage> {
    return this.t.request("GET", `${this.base}/files`, { query: { path: p } });
  }

  /** Creates or replaces a file atomically (parents must exist). mode: 0o644 or "644". */
  async write(p: string, data: Body, opts: { mode?: number | string } = {}): Promise<Entry> {
    const mode = typeof opts.mode === "number" ? opts.mode.toString(8) : opts.mode;
    return this.t.json("PUT", `${this.base}/files`, {
      query: { path: p, mode },
      body: data,
      headers: { "Content-Type": "application/octet-stream" },
    });
  }

  async list(p: string, depth = 1): Promise<Listing> {
    const d = await this.t.json<Listing>("GET", `${this.base}/fs/list`, { query: { path: p, depth } });
    return { entries: d?.entries ?? [], truncated: !!d?.truncated };
  }

  /** The entry (symlinks not followed); NotFoundError when missing. */
  stat(p: string): Promise<Entry> {
    return this.t.json("GET", `${this.base}/fs/stat`, { query: { path: p } });
  }

  async exists(p: string): Promise<boolean> {
    try {
      await this.stat(p);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  mkdir(p: string, opts: { parents?: boolean; mode?: number | string } = {}): Promise<Entry> {
    const mode = typeof opts.mode === "number" ? opts.mode.toString(8) : opts.mode;
    return this.t.json("POST", `${this.base}/fs/mkdir`, { json: defined({ path: p, parents: !!opts.parents, mode }) });
  }

  rename(from: string, to: string, opts: { overwrite?: boolean } = {}): Promise<Entry> {
    return this.t.json("POST", `${this.base}/fs/rename`, { json: { from, to, overwrite: !!opts.overwrite } });
  }

  async remove(p: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.t.json("POST", `${this.base}/fs/remove`, { json: { path: p, recursive: !!opts.recursive } });
  }

  /** Extracts a tar (optionally compressed) under the directory p. */
  uploadArchive(p: string, tar: Body): Promise<ArchiveResult> {
    return this.t.json("PUT", `${this.base}/archive`, {
      query: { path: p },
      body: tar,
      headers: { "Content-Type": "application/x-tar" },
    });
  }

  /** The tar of a file or tree (names start with the basename of p). */
  async downloadArchive(p: string): Promise<Buffer> {
    const res = await this.t.request("GET", `${this.base}/archive`, { query: { path: p }, headers: { Accept: "application/x-tar" } });
    return readAll(res, Number.MAX_SAFE_INTEGER);
  }

  /** Copies a local directory's contents into the sandbox directory p (which must exist).
   * Symlinks are stored, not followed. The tar is built in memory. */
  async uploadDir(localDir: string, p: string): Promise<ArchiveResult> {
    return this.uploadArchive(p, await packDir(localDir));
  }

  /** Copies the sandbox directory p into localDir (created if missing; what is there is
   * merged with); returns the names extracted. The archive is untrusted: absolute names, `..`,
   * hard links to anything but a file of the archive itself reject with ProtocolError;
   * nothing is written through a link; special files skipped; owners and setuid bits not
   * restored. It is extracted into a temporary directory beside localDir and merged only once
   * it was read completely: a broken download or a refused archive leaves localDir as it was.
   * The archive is held in memory. */
  async downloadDir(p: string, localDir: string): Promise<string[]> {
    const dest = path.resolve(localDir);
    const parent = path.dirname(dest);
    const entries = unpack(await this.downloadArchive(p));
    await fs.mkdir(parent, { recursive: true });
    const tmp = await fs.mkdtemp(path.join(parent, ".isola-dl-"));
    try {
      const x = await extractInto(entries, tmp);
      await fs.mkdir(dest, { recursive: true });
      await merge(tmp, dest);
      await fixDirModes(dest, x.dirModes);
      return x.names;
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  }
}

export { IsolaError };
