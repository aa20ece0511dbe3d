// SPDX-License-Identifier: Apache-2.0
// A minimal RFC 6455 WebSocket client over node:http's upgrade, and the attach/PTY session.

import { createHash, randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import * as http from "node:http";
import type { Duplex } from "node:stream";
import { ProtocolError, TimeoutError, UnavailableError, errorFromBodyPublic } from "./internal.js";
import type { Transport } from "./http.js";
import type { ExitStatus, Signal } from "./types.js";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const MAX_MESSAGE = 16 * 1024 * 1024;
export const OP_CONT = 0x0, OP_TEXT = 0x1, OP_BINARY = 0x2, OP_CLOSE = 0x8, OP_PING = 0x9, OP_PONG = 0xa;

export interface WsMessage {
  opcode: number;
  data: Buffer;
}

/** A client WebSocket: masked frames out, pings answered, messages reassembled. Emits
 * "message" (WsMessage) and "close" (code?: number, error?: Error). */
export class WebSocketClient extends EventEmitter {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private partsOp = -1;
  private partsLen = 0;
  closed = false;
  closeCode?: number;

  constructor(private readonly sock: Duplex, head: Buffer) {
    super();
    sock.on("data", (c: Buffer) => this.feed(c));
    sock.on("error", (e) => this.finish(undefined, e));
    sock.on("close", () => this.finish(this.closeCode));
    if (head.length) setImmediate(() => this.feed(head));
  }

  static connect(t: Transport, path: string, timeoutMs = 30000): Promise<WebSocketClient> {
    const key = randomBytes(16).toString("base64");
    return new Promise((resolve, reject) => {
      const req = http.request({
        ...t.target(path),
        method: "GET",
        headers: t.headers({
          Connection: "Upgrade",
          Upgrade: "websocket",
          "Sec-WebSocket-Key": key,
          "Sec-WebSocket-Version": "13",
        }),
      });
      let done = false;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        req.destroy();
        reject(new TimeoutError(`no WebSocket handshake reply within ${timeoutMs} ms`, "timeout"));
      }, timeoutMs);
      req.on("error", (e) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(new UnavailableError(`cannot reach isolad at ${t.where}: ${e.message}`, "unavailable"));
      });
      req.on("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          reject(errorFromBodyPublic(res.statusCode ?? 0, Buffer.concat(chunks), "GET", path));
        });
      });
      req.on("upgrade", (res, sock, head) => {
        if (done) {
          sock.destroy();
          return;
        }
        done = true;
        clearTimeout(timer);
        const want = createHash("sha1").update(key + GUID).digest("base64");
        if (res.headers["sec-websocket-accept"] !== want) {
          sock.destroy();
          reject(new ProtocolError("bad Sec-WebSocket-Accept from isolad"));
          return;
        }
        resolve(new WebSocketClient(sock, head));
      });
      req.end();
    });
  }

  send(opcode: number, payload: Buffer | string): void {
    const data = typeof payload === "string" ? Buffer.from(payload) : payload;
    const n = data.length;
    let head: Buffer;
    if (n < 126) {
      head = Buffer.from([0x80 | opcode, 0x80 | n]);
    } else if (n < 65536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 126;
      head.writeUInt16BE(n, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | opcode;
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(n), 2);
    }
    const mask = randomBytes(4);
    const masked = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) masked[i] = data[i] ^ mask[i & 3];
    this.sock.write(Buffer.concat([head, mask, masked]));
  }

  close(code = 1000): void {
    if (!this.closed) {
      const p = Buffer.alloc(2);
      p.writeUInt16BE(code);
      try {
        this.send(OP_CLOSE, p);
      } catch {
        /* already gone */
      }
    }
    this.sock.end();
    setTimeout(() => this.sock.destroy(), 1000).unref();
    this.finish(code);
  }

  private finish(code?: number, err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.emit("close", code, err);
  }

  private feed(c: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, c]) : c;
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0], b1 = this.buf[1];
      if (b0 & 0x70 || b1 & 0x80) return this.protocolError("bad frame header from isolad");
      let n = b1 & 0x7f, off = 2;
      if (n === 126) {
        if (this.buf.length < 4) return;
        n = this.buf.readUInt16BE(2);
        off = 4;
      } else if (n === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE)) return this.protocolError("WebSocket frame over 16 MiB");
        n = Number(big);
        off = 10;
      }
      if (this.buf.length < off + n) return;
      const payload = this.buf.subarray(off, off + n);
      this.buf = this.buf.subarray(off + n);
      this.frame(!!(b0 & 0x80), b0 & 0x0f, Buffer.from(payload));
      if (this.closed) return;
    }
  }

  private frame(fin: boolean, op: number, payload: Buffer): void {
    if (op === OP_PING) return this.send(OP_PONG, payload);
    if (op === OP_PONG) return;
    if (op === OP_CLOSE) {
      this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      try {
        this.send(OP_CLOSE, payload.subarray(0, 2));
      } catch {
        /* gone */
      }
      this.sock.end();
      this.finish(this.closeCode);
      return;
    }
    if (op !== OP_CONT) {
      this.partsOp = op;
      this.parts = [];
      this.partsLen = 0;
    } else if (this.partsOp < 0) {
      return this.protocolError("continuation frame without a message");
    }
    this.parts.push(payload);
    this.partsLen += payload.length;
    if (this.partsLen > MAX_MESSAGE) return this.protocolError("WebSocket message over 16 MiB");
    if (fin) {
      const msg = { opcode: this.partsOp, data: Buffer.concat(this.parts) };
      this.partsOp = -1;
      this.parts = [];
      this.partsLen = 0;
      this.emit("message", msg);
    }
  }

  private protocolError(msg: string): void {
    this.sock.destroy();
    this.finish(1002, new ProtocolError(`WebSocket: ${msg}`));
  }
}

/** An attached process (GET .../processes/{pid}/ws). Output arrives as Buffers ("data"
 * events, and accumulated in `output`); control messages land in `controls`. Closing the
 * session detaches without stopping the process. */
export class PtySession extends EventEmitter {
  output: Buffer = Buffer.alloc(0);
  controls: Record<string, any>[] = [];
  exit?: ExitStatus;
  ended = false;
  private endError?: Error;

  constructor(readonly ws: WebSocketClient) {
    super();
    ws.on("message", (m: WsMessage) => {
      if (m.opcode === OP_BINARY) {
        this.output = Buffer.concat([this.output, m.data]);
        this.emit("data", m.data);
      } else if (m.opcode === OP_TEXT) {
        let msg: Record<string, any>;
        try {
          msg = JSON.parse(m.data.toString("utf8"));
        } catch {
          return;
        }
        this.controls.push(msg);
        if (msg.type === "exit") {
          this.exit = msg as unknown as ExitStatus;
          this.emit("exit", this.exit);
        }
        this.emit("control", msg);
      }
      this.emit("progress");
    });
    ws.on("close", (_code?: number, err?: Error) => {
      this.ended = true;
      this.endError = err;
      this.emit("end", err);
      this.emit("progress");
    });
  }

  /** Writes to the process's stdin (terminal input for a tty). */
  send(data: Buffer | string): void {
    this.ws.send(OP_BINARY, typeof data === "string" ? Buffer.from(data) : data);
  }

  resize(cols: number, rows: number): void {
    this.ws.send(OP_TEXT, JSON.stringify({ type: "resize", cols, rows }));
  }

  signal(sig: Signal): void {
    this.ws.send(OP_TEXT, JSON.stringify({ type: "signal", signal: sig }));
  }

  closeStdin(): void {
    this.ws.send(OP_TEXT, JSON.stringify({ type: "close_stdin" }));
  }

  /** Resolves when pred() holds (checked after every message); rejects on timeout or when
   * the session ends first. */
  private until(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (pred()) {
          cleanup();
          resolve();
        } else if (this.ended) {
          cleanup();
          reject(this.endError ?? new ProtocolError(`session ended before ${what}; output ${JSON.stringify(this.output.subarray(-300).toString())}`));
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new TimeoutError(`${what} not seen within ${timeoutMs} ms; output ${JSON.stringify(this.output.subarray(-300).toString())}`, "timeout"));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.off("progress", check);
      };
      this.on("progress", check);
      check();
    });
  }

  /** Waits until the output from offset `start` matches pattern. */
  async readUntil(pattern: RegExp | string, timeoutMs = 30000, start = 0): Promise<RegExpMatchArray> {
    const rx = typeof pattern === "string" ? new RegExp(pattern.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")) : pattern;
    let m: RegExpMatchArray | null = null;
    await this.until(() => (m = this.output.subarray(start).toString("latin1").match(rx)) !== null, timeoutMs, `output matching ${rx}`);
    return m!;
  }

  /** Waits for the process's exit message. */
  async wait(timeoutMs = 60000): Promise<ExitStatus> {
    await this.until(() => this.exit !== undefined, timeoutMs, "the exit message");
    return this.exit!;
  }

  close(): void {
    this.ws.close();
  }
}
