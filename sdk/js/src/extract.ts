// SPDX-License-Identifier: Apache-2.0
// extract: downloadDir's extraction of an untrusted tar into a fresh temporary directory,
// merged into the destination only once the whole archive was parsed.
//
// The archive comes from isolad relaying a sandbox; a hostile or impersonated daemon can send
// anything. Every entry is created below a directory made for this download (mkdtemp); each
// parent component is lstat-ed and must be a real directory of this archive (a symlink in the
// archive is never traversed); files are opened O_CREAT|O_EXCL|O_NOFOLLOW; hard links only to
// regular files this extraction wrote; devices and fifos skipped; owners and setuid bits
// dropped. So no entry reaches a file that existed before (hard link `out/x` -> `victim.txt`,
// a symlink then a file through it, a planted `x.isola-tmp` symlink). The merge moves entries
// with rename, which replaces a link in the way instead of writing through it.
import { constants as C, promises as fs } from "node:fs";
import * as path from "node:path";
import { ConflictError, ProtocolError } from "./errors.js";
import type { TarEntry } from "./tar.js";

function refuse(name: string, why: string): ProtocolError {
  return new ProtocolError(`archive entry \`${name}\`: ${why}`, "forbidden");
}

/** Normalised components, or null for an absolute name or one with `..`. */
function parts(name: string): string[] | null {
  if (name.startsWith("/")) return null;
  const p = name.split("/").filter((x) => x !== "" && x !== ".");
  return p.includes("..") ? null : p;
}

async function lstatOrNull(p: string) {
  return fs.lstat(p).catch((e) => {
    if (e.code === "ENOENT") return null;
    throw e;
  });
}

/** The directory comps below root, each component a real directory (created if missing). */
async function openDir(root: string, comps: string[], create: boolean, name: string): Promise<string> {
  let cur = root;
  for (const c of comps) {
    cur = path.join(cur, c);
    const st = await lstatOrNull(cur);
    if (st === null) {
      if (!create) throw refuse(name, "its directory is not part of this archive");
      await fs.mkdir(cur, { mode: 0o755 });
    } else if (!st.isDirectory()) {
      throw refuse(name, "its parent is not a directory of this archive");
    }
  }
  return cur;
}

export interface Extracted {
  names: string[]; // extracted, relative to the root
  dirModes: [string, number][]; // directories whose mode lacked u+rwx
}

/** Extracts entries whose single top entry is the downloaded directory into root (a fresh
 * directory): the top entry's contents land directly in root. Throws ProtocolError for a
 * hostile entry; root is then half-filled and the caller removes it. */
export async function extractInto(entries: TarEntry[], root: string): Promise<Extracted> {
  const out: Extracted = { names: [], dirModes: [] };
  let top: string | undefined;
  for (const e of entries) {
    const p = parts(e.name);
    if (p === null) throw refuse(e.name, "absolute name or `..`: it would land outside the destination");
    if (p.length === 0) continue;
    if (top === undefined) top = p[0];
    else if (p[0] !== top) throw refuse(e.name, "not under the archive's top entry");
    const rel = p.slice(1);
    if (rel.length === 0) continue;
    if (e.type === "other") continue; // devices, fifos: never created
    const parent = await openDir(root, rel.slice(0, -1), true, e.name);
    const target = path.join(parent, rel[rel.length - 1]);
    const st = await lstatOrNull(target);
    if (st !== null && !(st.isDirectory() && e.type === "dir")) {
      await fs.rm(target, { recursive: true, force: true }); // an earlier entry of this archive
    }
    const mode = e.mode & 0o777;
    if (e.type === "dir") {
      if (st === null || !st.isDirectory()) await fs.mkdir(target, { mode: 0o700 });
      await fs.chmod(target, mode | 0o700);
      if ((mode & 0o700) !== 0o700) out.dirModes.push([rel.join("/"), mode]);
    } else if (e.type === "file") {
      const fh = await fs.open(target, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
      try {
        await fh.write(e.data);
        await fh.chmod(mode);
      } finally {
        await fh.close();
      }
    } else if (e.type === "symlink") {
      await fs.symlink(e.linkname, target);
    } else {
      const t = parts(e.linkname);
      if (!t || t[0] !== top || t.length < 2) throw refuse(e.name, "hard link target outside the archive");
      const tdir = await openDir(root, t.slice(1, -1), false, e.name);
      const tst = await lstatOrNull(path.join(tdir, t[t.length - 1]));
      if (tst === null || !tst.isFile()) throw refuse(e.name, "hard link target is not a file extracted before it");
      await fs.link(path.join(tdir, t[t.length - 1]), target);
    }
    out.names.push(rel.join("/"));
  }
  return out;
}

/** Moves every entry of src into directory dst: new names by rename, directories merged,
 * other existing entries replaced (a symlink in the way is replaced, never followed). */
export async function merge(src: string, dst: string): Promise<void> {
  for (const de of await fs.readdir(src, { withFileTypes: true })) {
    const s = path.join(src, de.name);
    const d = path.join(dst, de.name);
    const dst_st = await lstatOrNull(d);
    if (dst_st === null) {
      await fs.rename(s, d);
    } else if (dst_st.isDirectory()) {
      if (!de.isDirectory()) throw new ConflictError(`cannot replace directory \`${d}\` with a file`, "conflict");
      await merge(s, d);
    } else {
      if (de.isDirectory()) await fs.unlink(d);
      await fs.rename(s, d);
    }
  }
}

/** Applies the archive's modes to directories that lacked u+rwx (deepest first). */
export async function fixDirModes(dst: string, dirModes: [string, number][]): Promise<void> {
  for (const [rel, mode] of [...dirModes].reverse()) {
    const p = path.join(dst, rel);
    const st = await lstatOrNull(p);
    if (st?.isDirectory()) await fs.chmod(p, mode);
  }
}
