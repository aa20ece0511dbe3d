// SPDX-License-Identifier: Apache-2.0
// A minimal tar (ustar + pax) writer and reader for directory upload and download.

import { promises as fs } from "node:fs";
import * as path from "node:path";

const BLOCK = 512;

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, type: string, size: number, mode: number, mtime: number, linkname = ""): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, "utf8");
  h.write(octal(mode & 0o7777, 8), 100, "ascii");
  h.write(octal(0, 8), 108, "ascii");
  h.write(octal(0, 8), 116, "ascii");
  h.write(octal(size, 12), 124, "ascii");
  h.write(octal(Math.max(0, Math.floor(mtime)), 12), 136, "ascii");
  h.write("        ", 148, "ascii");
  h.write(type, 156, "ascii");
  h.write(linkname, 157, 100, "utf8");
  h.write("ustar\0", 257, "ascii");
  h.write("00", 263, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7) + " ", 148, "ascii");
  return h;
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return Buffer.from(`${len}${body}`);
}

function pad(n: number): Buffer {
  return Buffer.alloc((BLOCK - (n % BLOCK)) % BLOCK);
}

function entry(name: string, type: string, data: Buffer, mode: number, mtime: number, linkname = ""): Buffer[] {
  const out: Buffer[] = [];
  if (Buffer.byteLength(name) > 99 || Buffer.byteLength(linkname) > 99) {
    const pax = Buffer.concat([
      paxRecord("path", name),
      ...(linkname ? [paxRecord("linkpath", linkname)] : []),
    ]);
    out.push(header("PaxHeader", "x", pax.length, 0o644, mtime), pax, pad(pax.length));
  }
  out.push(header(name.slice(0, 99), type, data.length, mode, mtime, linkname.slice(0, 99)), data, pad(data.length));
  return out;
}

/** Packs the contents of dir (not dir itself) into a tar; symlinks stored, not followed. */
export async function packDir(dir: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  async function walk(abs: string, rel: string): Promise<void> {
    const names = (await fs.readdir(abs)).sort();
    for (const n of names) {
      const a = path.join(abs, n), r = rel ? `${rel}/${n}` : n;
      const st = await fs.lstat(a);
      const mtime = st.mtimeMs / 1000;
      if (st.isSymbolicLink()) {
        parts.push(...entry(r, "2", Buffer.alloc(0), st.mode, mtime, await fs.readlink(a)));
      } else if (st.isDirectory()) {
        parts.push(...entry(`${r}/`, "5", Buffer.alloc(0), st.mode, mtime));
        await walk(a, r);
      } else if (st.isFile()) {
        parts.push(...entry(r, "0", await fs.readFile(a), st.mode, mtime));
      } // devices, fifos, sockets: skipped
    }
  }
  await walk(dir, "");
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

export interface TarEntry {
  name: string;
  type: "file" | "dir" | "symlink" | "hardlink" | "other";
  mode: number;
  data: Buffer;
  linkname: string;
}

function str(b: Buffer, off: number, len: number): string {
  const s = b.subarray(off, off + len);
  const z = s.indexOf(0);
  return (z >= 0 ? s.subarray(0, z) : s).toString("utf8");
}

function num(b: Buffer, off: number, len: number): number {
  const s = str(b, off, len).trim();
  return s ? parseInt(s, 8) : 0;
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(0x20, i);
    if (sp < 0) break;
    const len = parseInt(data.subarray(i, sp).toString("ascii"), 10);
    if (!(len > 0) || i + len > data.length) break;
    const rec = data.subarray(sp + 1, i + len - 1).toString("utf8");
    const eq = rec.indexOf("=");
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

/** Parses a whole (uncompressed) tar. UNTRUSTED input: sizes are checked against the buffer. */
export function unpack(buf: Buffer): TarEntry[] {
  const out: TarEntry[] = [];
  let off = 0;
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  while (off + BLOCK <= buf.length) {
    const h = buf.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    const size = num(h, 124, 12);
    const type = String.fromCharCode(h[156] || 0x30);
    const dataStart = off + BLOCK;
    if (size < 0 || dataStart + size > buf.length) throw new Error("truncated tar archive");
    const data = buf.subarray(dataStart, dataStart + size);
    off = dataStart + size + ((BLOCK - (size % BLOCK)) % BLOCK);
    if (type === "x") {
      pax = parsePax(data);
      continue;
    }
    if (type === "g") continue;
    if (type === "L") {
      longName = str(data, 0, data.length);
      continue;
    }
    const prefix = str(h, 345, 155);
    let name = pax.path ?? longName ?? (prefix ? `${prefix}/${str(h, 0, 100)}` : str(h, 0, 100));
    const linkname = pax.linkpath ?? str(h, 157, 100);
    pax = {};
    longName = undefined;
    name = name.replace(/\/+$/, "");
    const kind =
      type === "0" || type === "\0" || type === "7" ? "file" : type === "5" ? "dir" : type === "2" ? "symlink" : type === "1" ? "hardlink" : "other";
    out.push({ name, type: kind, mode: num(h, 100, 8), data: Buffer.from(data), linkname });
  }
  return out;
}
