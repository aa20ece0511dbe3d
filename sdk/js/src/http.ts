// SPDX-License-Identifier: Apache-2.0
// HTTP/1.1 to isolad over its unix socket or TCP (bearer token), on node:http.

import * as http from "node:http";
import { Readable } from "node:stream";
import { IsolaError, ProtocolError, RateLimitedError, TimeoutError, UnavailableError, errorFor } from "./errors.js";

export const DEFAULT_SOCKET = "/run/isola/isolad.sock";
const USER_AGENT = "isola-js/0.1.0";
const MAX_ERROR_BODY = 64 * 1024;
const MAX_JSON_BODY = 64 * 1024 * 1024;
const MAX_LINE = 16 * 1024 * 1024;

export interface ClientOptions {
  /** unix socket of isolad (default $ISOLA_SOCKET or /run/isola/isolad.sock) */
  socketPath?: string;
  /** TCP instead: http://HOST:PORT (default $ISOLA_URL) */
  url?: string;
  /** bearer token for TCP (default $ISOLA_TOKEN) */
  token?: string;
  /** ms without any progress before a request fails with TimeoutError (default 60000; 0 = none) */
  timeout?: number;
}

export type Body = Buffer | Uint8Array | string | Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
export type Query = Record<string, string | number | boolean | undefined | null> | [string, string][];

export interface RequestOptions {
  query?: Query;
  json?: unknown;
  body?: Body;
  headers?: Record<string, string>;
  /** inactivity timeout in ms for this request (0 = none) */
  timeout?: number;
}

export function seg(s: string | number): string {
  return encodeURIComponent(String(s));
}

function queryString(q?: Query): string {
  if (!q) return "";
  const pairs = Array.isArray(q) ? q : Object.entries(q);
  const parts: string[] = [];
  for (const [k, v] of pairs) {
    if (v === undefined || v === null) continue;
    parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

export class Transport {
  readonly socketPath?: string;
  readonly host?: string;
  readonly port?: number;
  readonly prefix: string = "";
  readonly token?: string;
  readonly timeout: number;

  constructor(opts: ClientOptions = {}) {
    let { socketPath, url, token } = opts;
    if (socketPath === undefined && url === undefined) {
      url = process.env.ISOLA_URL || undefined;
      socketPath = process.env.ISOLA_SOCKET || DEFAULT_SOCKET;
    }
    this.token = token ?? (process.env.ISOLA_TOKEN || undefined);
    this.timeout = opts.timeout ?? 60000;
    if (url) {
      const u = new URL(url);
      if (u.protocol !== "http:" || !u.hostname) throw new TypeError(`url \`${url}\`: expected http://HOST:PORT`);
      this.host = u.hostname.replace(/^\[|\]$/g, "");
      this.port = u.port ? Number(u.port) : 80;
      this.prefix = u.pathname.replace(/\/+$/, "");
    } else {
      this.socketPath = socketPath;
    }
  }

  get where(): string {
    return this.host ? `http://${this.host}:${this.port}` : String(this.socketPath);
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": USER_AGENT };
    if (this.token) h["Authorization"] = `Bearer ${this.token}`;
    return Object.assign(h, extra ?? {});
  }

  /** Connection options for node:http (also used for WebSocket upgrades). */
  target(path: string): http.RequestOptions {
    const base: http.RequestOptions = { path: this.prefix + path, agent: false };
    if (this.host) return { ...base, host: this.host, port: this.port };
    return { ...base, socketPath: this.socketPath, host: "localhost" };
  }

  /** Sends a request and resolves with the response once its status is a success; rejects
   * with the typed API error otherwise. The caller consumes (or destroys) the response. */
  request(method: string, path: string, opts: RequestOptions = {}): Promise<http.IncomingMessage> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    let body: Body | undefined = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers["Content-Type"] ??= "application/json";
    }
    if (typeof body === "string") body = Buffer.from(body);
    if (body instanceof Uint8Array) headers["Content-Length"] = String(body.length);
    else if (body === undefined && (method === "POST" || method === "PUT")) headers["Content-Length"] = "0";
    const timeout = opts.timeout ?? this.timeout;
    const fullPath = path + queryString(opts.query);
    return new Promise((resolve, reject) => {
      const req = http.request({ ...this.target(fullPath), method, headers: this.headers(headers) });
      let settled = false;
      const fail = (e: Error) => {
        if (settled) return;
        settled = true;
        req.destroy();
        reject(e);
      };
      if (timeout > 0) {
        req.setTimeout(timeout, () =>
          fail(new TimeoutError(`no answer from isolad within ${timeout} ms (${method} ${path})`, "timeout")),
        );
      }
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (settled) return;
        settled = true;
        reject(new UnavailableError(`cannot reach isolad at ${this.where}: ${e.message}`, "unavailable"));
      });
      req.on("response", (res) => {
        if (settled) {
          res.destroy();
          return;
        }
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          settled = true;
          // From here the inactivity timeout is the response's: it errors the stream.
          if (timeout > 0) {
            req.setTimeout(0);
            res.setTimeout(timeout, () =>
              res.destroy(new TimeoutError(`isolad sent nothing for ${timeout} ms (${method} ${path})`, "timeout")),
            );
          }
          resolve(res);
          return;
        }
        const chunks: Buffer[] = [];
        let n = 0;
        res.on("data", (c: Buffer) => {
          if (n < MAX_ERROR_BODY) chunks.push(c);
          n += c.length;
        });
        res.on("error", () => {});
        res.on("end", () => {
          settled = true;
          const err = errorFromBody(status, Buffer.concat(chunks), method, path);
          const ra = Number(res.headers["retry-after"]);
          if (err instanceof RateLimitedError && Number.isFinite(ra)) err.retryAfter = ra;
          reject(err);
        });
      });
      if (body === undefined || body instanceof Uint8Array) {
        req.end(body);
      } else {
        const src = body instanceof Readable ? body : Readable.from(body as AsyncIterable<Uint8Array>);
        src.on("error", (e) => fail(e instanceof IsolaError ? e : new IsolaError(`request body: ${e.message}`)));
        src.pipe(req);
      }
    });
  }

  /** A request whose reply is one JSON document (undefined for 204). */
  async json<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, path, { ...opts, headers: { Accept: "application/json", ...(opts.headers ?? {}) } });
    const buf = await readAll(res, MAX_JSON_BODY);
    if (res.statusCode === 204 || buf.length === 0) return undefined as T;
    try {
      return JSON.parse(buf.toString("utf8")) as T;
    } catch (e) {
      throw new ProtocolError(`isolad sent malformed JSON: ${(e as Error).message}`, "internal", res.statusCode);
    }
  }
}

export function errorFromBody(status: number, body: Buffer, method: string, path: string): IsolaError {
  let code: string | undefined;
  let message: string | undefined;
  let obj: Record<string, any> | undefined;
  try {
    let d = JSON.parse(body.toString("utf8"));
    if (d && typeof d.error === "object") d = d.error;
    code = typeof d?.code === "string" ? d.code : undefined;
    message = typeof d?.message === "string" ? d.message : undefined;
    obj = d && typeof d === "object" ? d : undefined;
  } catch {
    /* not JSON */
  }
  return errorFor(code, message || `isolad replied HTTP ${status} to ${method} ${path}`, status, obj);
}

function wrapStreamError(e: unknown): Error {
  if (e instanceof IsolaError) return e;
  return new ProtocolError(`reply from isolad broke off: ${(e as Error)?.message ?? e}`, "internal");
}

export async function readAll(res: Readable, max = MAX_JSON_BODY): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const c of res) {
      n += (c as Buffer).length;
      if (n > max) throw new ProtocolError("reply from isolad is too large", "too_large");
      chunks.push(c as Buffer);
    }
  } catch (e) {
    res.destroy();
    throw wrapStreamError(e);
  }
  return Buffer.concat(chunks);
}

/** Each NDJSON line of a response as an object. */
export async function* jsonLines(res: Readable): AsyncGenerator<Record<string, any>> {
  let buf: Buffer = Buffer.alloc(0);
  try {
    for await (const c of res) {
      buf = buf.length ? Buffer.concat([buf, c as Buffer]) : (c as Buffer);
      let nl: number;
      while ((nl = buf.indexOf(0x0a)) >= 0) {
        const line = buf.subarray(0, nl).toString("utf8").trim();
        buf = buf.subarray(nl + 1);
        if (line) yield parseLine(line);
      }
      if (buf.length > MAX_LINE) throw new ProtocolError("isolad sent an event over 16 MiB", "too_large");
    }
  } catch (e) {
    res.destroy();
    throw wrapStreamError(e);
  }
  const last = buf.toString("utf8").trim();
  if (last) yield parseLine(last);
}

function parseLine(line: string): Record<string, any> {
  try {
    return JSON.parse(line);
  } catch (e) {
    throw new ProtocolError(`isolad sent a malformed event: ${(e as Error).message}`, "internal");
  }
}
