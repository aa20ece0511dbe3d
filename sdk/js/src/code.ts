// SPDX-License-Identifier: Apache-2.0
// code: the code interpreter (POST /v1/sandboxes/{id}/code/execute, .../code/contexts; docs/code-interpreter.md).
import { type Transport, jsonLines } from "./http.js";

const MIME_FIELDS = ["text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript", "data", "chart"] as const;

/** One rich result: the last expression's value (isMainResult) or a display (a figure). Images
 * are base64 strings. Representations without a field of their own are in `extra`. */
export class Result {
  isMainResult: boolean;
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  latex?: string;
  json?: unknown;
  javascript?: string;
  data?: unknown;
  chart?: any;
  extra: Record<string, unknown> = {};

  constructor(raw: Record<string, any>) {
    this.isMainResult = !!raw.is_main_result;
    for (const [k, v] of Object.entries(raw)) {
      if ((MIME_FIELDS as readonly string[]).includes(k)) (this as any)[k] = v;
      else if (k !== "type" && k !== "is_main_result") this.extra[k] = v;
    }
  }

  /** The representations present, besides text. */
  formats(): string[] {
    return [...MIME_FIELDS.filter((k) => k !== "text" && (this as any)[k] !== undefined), ...Object.keys(this.extra)];
  }
}

/** An exception raised by the code. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** What one runCode produced. */
export class Execution {
  results: Result[] = [];
  logs: { stdout: string[]; stderr: string[] } = { stdout: [], stderr: [] };
  error?: ExecutionError;
  executionCount?: number;

  /** The main result's text. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }
}

/** A live interpreter: variables, imports and cwd persist between runCode calls. */
export interface CodeContext {
  id: string;
  language: string;
  cwd: string;
}

export interface RunCodeOptions {
  /** python (default), js, ts, bash; not with `context`. */
  language?: string;
  /** A context or its id; not with `language`. */
  context?: CodeContext | string;
  env?: Record<string, string>;
  /** Seconds; past it the execution is interrupted (the context keeps its state). */
  timeout?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (r: Result) => void;
  onError?: (e: ExecutionError) => void;
}

const ctxId = (c: CodeContext | string) => (typeof c === "string" ? c : c.id);

export async function runCode(t: Transport, base: string, code: string, opts: RunCodeOptions = {}): Promise<Execution> {
  const body: Record<string, unknown> = { code };
  if (opts.language !== undefined) body.language = opts.language;
  if (opts.context !== undefined) body.context = ctxId(opts.context);
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.timeout !== undefined) body.timeout = opts.timeout;
  const res = await t.request("POST", `${base}/code/execute`, {
    json: body,
    headers: { Accept: "application/x-ndjson" },
    timeout: opts.timeout !== undefined ? (opts.timeout + 30) * 1000 : 0,
  });
  const ex = new Execution();
  try {
    for await (const d of jsonLines(res)) {
      if (d.type === "stdout") {
        ex.logs.stdout.push(d.text ?? "");
        opts.onStdout?.(d.text ?? "");
      } else if (d.type === "stderr") {
        ex.logs.stderr.push(d.text ?? "");
        opts.onStderr?.(d.text ?? "");
      } else if (d.type === "result") {
        const r = new Result(d);
        ex.results.push(r);
        opts.onResult?.(r);
      } else if (d.type === "error") {
        ex.error = { name: d.name ?? "", value: d.value ?? "", traceback: d.traceback ?? "" };
        opts.onError?.(ex.error);
      } else if (d.type === "number_of_executions") {
        ex.executionCount = d.execution_count;
      }
    }
  } finally {
    res.destroy();
  }
  return ex;
}

export function createCodeContext(t: Transport, base: string, opts: { language?: string; cwd?: string } = {}): Promise<CodeContext> {
  const body: Record<string, unknown> = {};
  if (opts.language !== undefined) body.language = opts.language;
  if (opts.cwd !== undefined) body.cwd = opts.cwd;
  return t.json<CodeContext>("POST", `${base}/code/contexts`, { json: body });
}

export async function listCodeContexts(t: Transport, base: string): Promise<CodeContext[]> {
  const d = await t.json<{ contexts: CodeContext[] }>("GET", `${base}/code/contexts`);
  return d?.contexts ?? [];
}

export async function restartCodeContext(t: Transport, base: string, c: CodeContext | string): Promise<void> {
  await t.json("POST", `${base}/code/contexts/${encodeURIComponent(ctxId(c))}/restart`);
}

export async function removeCodeContext(t: Transport, base: string, c: CodeContext | string): Promise<void> {
  await t.json("DELETE", `${base}/code/contexts/${encodeURIComponent(ctxId(c))}`);
}
