// SPDX-License-Identifier: Apache-2.0
// The API's objects (docs/openapi.yaml). Objects may carry more fields than listed.

export interface Health {
  status: string;
  version: string;
}

export type Size = number | string; // bytes or "512M"

export interface CreateSandboxOptions {
  template?: string;
  tier?: "process" | "microvm";
  cpu?: number;
  memory?: Size;
  disk?: Size;
  pids?: number;
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
  /** seconds until the sandbox expires; 0 = daemon default */
  ttl?: number;
  labels?: Record<string, string>;
  /** start from this named snapshot instead of a template */
  snapshot?: string;
  /** egress policy (docs/network.md) */
  network?: NetworkPolicy;
  /** what happens when the TTL or the idle timeout runs out */
  on_timeout?: "kill" | "pause" | "hibernate";
  /** seconds without API use, CPU use, streams or user processes; 0 = off */
  idle_timeout?: number;
  auto_resume?: boolean;
  /** unique among the tenant's live sandboxes (NameTakenError otherwise); usable wherever an id is */
  name?: string;
  /** capabilities root gains beyond the default set ("NET_BROADCAST", "CAP_SYS_NICE", ...);
   *  never-listed ones (SYS_ADMIN, NET_ADMIN, SYS_PTRACE, ...) are refused with 400 */
  cap_add?: string[];
  /** capabilities root gives up ("ALL" = every one); applied before cap_add */
  cap_drop?: string[];
  /** new tmpfs mounts (nosuid, nodev; size bounded by the memory limit; docs/oci.md) */
  tmpfs?: TmpfsMount[];
  /** paths covered inside the sandbox (a file reads empty, a directory is empty); missing ones skipped */
  masked_paths?: string[];
  /** paths made read-only inside the sandbox; missing ones skipped */
  readonly_paths?: string[];
  /** the root filesystem read-only (tmpfs mounts, /dev/shm, /dev/mqueue stay writable;
   *  docker run --read-only; process tier) */
  readonly_root?: boolean;
  /** an OCI `linux.seccomp` profile every process started in the sandbox runs under, on top
   * of isola's own filter (process tier; docs/oci.md) */
  seccomp?: SeccompProfile;
}

/** The OCI runtime spec's `linux.seccomp` object (docs/oci.md, "The spec's seccomp profile"). */
export interface SeccompProfile {
  defaultAction: string;
  defaultErrnoRet?: number;
  architectures?: string[];
  flags?: string[];
  syscalls?: SeccompRule[];
}

/** One `syscalls` entry: names, action, errnoRet for SCMP_ACT_ERRNO/TRACE, argument tests. */
export interface SeccompRule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: { index: number; value: number; valueTwo?: number; op: string }[];
}

/** What only narrows one command (docs/process-tier.md, "Narrowing a command"); what would
 *  widen it (a limit raised past the sandbox's, oom_score_adj lowered) is refused (403). */
export interface Narrowing {
  /** the primary group instead of the user's passwd one, 0-65535 */
  gid?: number;
  /** supplementary groups added to the user's, each 0-65535 */
  additional_gids?: number[];
  /** 0-0o777, or an octal string ("022") */
  umask?: number | string;
  /** limits lowered for the command: type "RLIMIT_NOFILE" or "nofile", soft <= hard */
  rlimits?: { type: string; soft: number; hard: number }[];
  /** a limit above the sandbox's is lowered to it instead of refused */
  rlimits_cap?: boolean;
  /** -1000..1000, at or above the sandbox's own */
  oom_score_adj?: number;
}

/** One `tmpfs` entry of a create request. */
export interface TmpfsMount {
  destination: string;
  /** bytes or a size like "16M"; default half the memory limit */
  size?: number | string;
  /** the root directory's mode, e.g. 0o1777 */
  mode?: number;
  noexec?: boolean;
  readonly?: boolean;
}

/** What survives each operation on this sandbox's tier. */
export type PersistenceLevel = "none" | "files" | "files+memory";

export interface LifecycleOptions {
  on_timeout?: "kill" | "pause" | "hibernate";
  idle_timeout?: number;
  auto_resume?: boolean;
}

export interface NetworkRule {
  cidr?: string;
  domain?: string;
  ports?: (number | string)[];
}

export interface NetworkPolicy {
  default?: "deny" | "allow";
  allow?: (NetworkRule | string)[];
  deny?: (NetworkRule | string)[];
}

export interface Snapshot {
  name: string;
  id: string;
  tier: string;
  template: string;
  level: PersistenceLevel | string;
  size: number;
  created_at?: number;
  source?: string;
  parent?: string | null;
  [key: string]: unknown;
}

export interface ForkResult {
  source: string;
  /** how long the source was paused, microseconds */
  paused_us: number;
  level: PersistenceLevel | string;
  snapshot: string;
  children: SandboxInfo[];
}

export interface Exposure {
  port: number;
  url: string;
  path_url?: string;
  public: boolean;
  /** absent for a public exposure */
  token?: string;
  [key: string]: unknown;
}

export interface Pool {
  template: string;
  tier: string;
  size: number;
  ready: number;
  creating: number;
  claims: number;
  misses: number;
  failures: number;
  last_error?: string;
}

export interface SandboxInfo {
  id: string;
  state: "creating" | "running" | "paused" | "hibernated" | "destroying" | "error" | "lost" | string;
  tier: string;
  template: string;
  labels?: Record<string, string>;
  created_at?: number;
  expires_at?: number | null;
  /** per operation: stop, pause, hibernate, snapshot, fork */
  persistence?: Record<string, PersistenceLevel | string>;
  error?: string | null;
  cpu?: number;
  memory?: number;
  disk?: number;
  pids?: number;
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
  name?: string | null;
  /** a tombstone (state "ended") or an errored sandbox: expired | idle | destroyed | error */
  end_reason?: string;
  ended_at?: number;
  /** e.g. "ttl 3s", or the error */
  detail?: string | null;
  /** what the sandbox's root holds ("CAP_CHOWN", ...); every process's bounding set */
  capabilities?: string[];
  [key: string]: unknown;
}

/** A shell line (run by /bin/sh -c) or an argv array. */
export type Command = string | string[];

export interface ExecOptions {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  /** seconds; the agent kills the command after it (result.timed_out) */
  timeout?: number;
  /** fed to the command, then closed */
  stdin?: string;
  /** bytes kept per stream in the result (whole-result exec only) */
  maxOutput?: number;
  onStdout?: (data: Buffer) => void;
  onStderr?: (data: Buffer) => void;
  narrow?: Narrowing;
}

export interface ExitStatus {
  exit_code: number;
  signal: number;
  timed_out: boolean;
  oom_killed: boolean;
  duration_ms: number;
  pid?: number;
}

export interface ExecResult extends ExitStatus {
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  stdout_bytes: number;
  stderr_bytes: number;
  /** present when the stream was not valid UTF-8 */
  stdout_b64?: string;
  stderr_b64?: string;
}

export interface OutputResult {
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  stdout_bytes: number;
  stderr_bytes: number;
  stdout_b64?: string;
  stderr_b64?: string;
  dropped?: { type: "dropped"; stream: "stdout" | "stderr"; bytes: number }[];
  exit_code?: number;
  signal?: number;
  timed_out?: boolean;
  oom_killed?: boolean;
  duration_ms?: number;
}

/** One event of an exec or output stream; `data` is decoded from base64. */
export type ExecEvent =
  | { type: "start"; pid: number }
  | { type: "stdout" | "stderr"; data: Buffer }
  | { type: "dropped"; stream: "stdout" | "stderr"; bytes: number }
  | ({ type: "exit" } & ExitStatus)
  | { type: "error"; code: string; message: string };

export interface ProcessStartOptions {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  tty?: boolean;
  cols?: number;
  rows?: number;
  timeout?: number;
  tag?: string;
  narrow?: Narrowing;
}

export interface ProcessInfo {
  pid: number;
  argv: string[];
  running: boolean;
  tty?: boolean;
  tag?: string | null;
  exit_code?: number | null;
  signal?: number;
  started_at?: number;
  [key: string]: unknown;
}

export interface Entry {
  name: string;
  path?: string;
  type: "file" | "dir" | "symlink" | "other";
  size?: number;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: number;
  target?: string | null;
  [key: string]: unknown;
}

export interface Listing {
  entries: Entry[];
  truncated: boolean;
}

export interface ArchiveResult {
  entries: number;
  bytes: number;
}

export interface Template {
  name: string;
  id?: string;
  source?: string;
  size_bytes?: number;
  created_at?: number;
  [key: string]: unknown;
}

export interface ImportProgress {
  phase: string;
  done: number;
  total: number;
}

export type Signal = number | string;
