// SPDX-License-Identifier: Apache-2.0
// @isola/sdk (sdk/js) against a real isolad started by run.sh (ISOLA_TEST_SOCKET/URL/TOKEN).
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, readlinkSync, symlinkSync, chmodSync, statSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const SOCKET = process.env.ISOLA_TEST_SOCKET;
const URL_ = process.env.ISOLA_TEST_URL;
const TOKEN = process.env.ISOLA_TEST_TOKEN;
assert.ok(SOCKET && URL_ && TOKEN, "run through tests/sdk-js/run.sh (ISOLA_TEST_* unset)");

const client = new isola.Client({ socketPath: SOCKET, timeout: 30000 });

async function rejects(p, cls, check) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${e?.name}: ${e?.message}`);
    if (check) check(e);
    return true;
  });
}

describe("host and sandboxes", () => {
  test("health and doctor", async () => {
    const h = await client.health();
    assert.equal(h.status, "ok");
    assert.ok(h.version);
    const d = await client.doctor();
    assert.equal(typeof d, "object");
    assert.ok(Object.keys(d).length > 0);
  });

  test("create, get, list by labels, delete", async () => {
    const sb = await client.createSandbox({ memory: "256M", labels: { suite: "sdk-js", case: "life" }, env: { FOO: "bar" } });
    try {
      assert.equal(sb.info.state, "running");
      assert.equal(sb.info.memory, 256 * 1024 * 1024);
      assert.deepEqual(sb.info.labels, { suite: "sdk-js", case: "life" });
      const got = await client.getSandbox(sb.id);
      assert.equal(got.info.id, sb.id);
      assert.deepEqual((await client.listSandboxes({ case: "life" })).map((s) => s.id), [sb.id]);
      assert.deepEqual(await client.listSandboxes({ case: "life", suite: "nope" }), []);
      assert.equal((await sb.exec("echo $FOO", { timeout: 20 })).stdout, "bar\n");
    } finally {
      await sb.delete();
    }
    await rejects(client.getSandbox(sb.id), isola.SandboxEndedError, (e) => {
      assert.ok(e instanceof isola.NotFoundError);
      assert.equal(e.status, 410);
      assert.equal(e.code, "sandbox_ended");
      assert.equal(e.endReason, "destroyed");
    });
    await rejects(client.getSandbox("nosuchsandbox000"), isola.NotFoundError, (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.code, "not_found");
    });
    await rejects(sb.delete(), isola.NotFoundError);
  });

  test("setTimeout sets expires_at", async () => {
    const sb = await client.createSandbox();
    try {
      const now = Date.now() / 1000;
      const info = await sb.setTimeout(600);
      assert.ok(info.expires_at >= now + 590 && info.expires_at <= now + 610, JSON.stringify(info));
    } finally {
      await sb.delete();
    }
  });

  test("typed validation errors", async () => {
    await rejects(client.createSandbox({ tier: "bogus" }), isola.InvalidError, (e) => assert.equal(e.status, 400));
    await rejects(client.createSandbox({ memory: "1M" }), isola.InvalidError, (e) => assert.equal(e.status, 400));
    await rejects(client.createSandbox({ template: "no-such-template" }), isola.NotFoundError);
    await rejects(client.sandbox("nosuchsandbox").exec("true", { timeout: 5 }), isola.NotFoundError);
  });

  test("TCP with token; wrong token is 401; unreachable daemon", async () => {
    const tcp = new isola.Client({ url: URL_, token: TOKEN, timeout: 30000 });
    const sb = await tcp.createSandbox();
    try {
      assert.equal((await sb.exec(["echo", "over", "tcp"], { timeout: 20 })).stdout, "over tcp\n");
      const pty = await sb.pty("/bin/sh");
      pty.send("echo tc$((1+1))p\n");
      await pty.readUntil(/tc2p/, 20000);
      pty.close();
    } finally {
      await sb.delete();
    }
    const bad = new isola.Client({ url: URL_, token: "wrong", timeout: 10000 });
    assert.equal((await bad.health()).status, "ok");
    await rejects(bad.listSandboxes(), isola.UnauthorizedError, (e) => assert.equal(e.status, 401));
    await rejects(bad.sandbox("x").attach(1), isola.UnauthorizedError);
    const none = new isola.Client({ socketPath: join(tmpdir(), "isola-no-such.sock"), timeout: 5000 });
    await rejects(none.health(), isola.UnavailableError, (e) => assert.equal(e.status, undefined));
    assert.throws(() => new isola.Client({ url: "ftp://x" }), TypeError);
  });
});

describe("commands and processes", () => {
  let sb;
  before(async () => {
    sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
  });
  after(async () => {
    await sb?.delete().catch(() => {});
  });

  test("exec shell line and argv", async () => {
    let r = await sb.exec("echo out; echo err >&2; exit 3", { timeout: 20 });
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    assert.equal(r.exit_code, 3);
    r = await sb.exec(["printf", "%s|", "a b", "c"], { timeout: 20 });
    assert.equal(r.stdout, "a b|c|");
    r = await sb.exec("echo $A; pwd; cat", { env: { A: "1" }, cwd: "/tmp", stdin: "in", timeout: 20 });
    assert.equal(r.stdout, "1\n/tmp\nin");
  });

  test("exec timeout, signal, truncation, errors", async () => {
    let r = await sb.exec(["sleep", "30"], { timeout: 1 });
    assert.equal(r.timed_out, true);
    r = await sb.exec("kill -9 $$", { timeout: 20 });
    assert.equal(r.signal, 9);
    assert.equal(r.exit_code, 137);
    r = await sb.exec("head -c 5000 /dev/zero", { maxOutput: 100, timeout: 20 });
    assert.equal(r.stdout_truncated, true);
    assert.equal(r.stdout_bytes, 5000);
    await rejects(sb.exec(["/no/such/program"], { timeout: 20 }), isola.NotFoundError);
    await assert.rejects(sb.exec([]), TypeError);
  });

  test("oom_killed when a child of the command was OOM-killed (the shell exits 0)", async () => {
    const small = await client.createSandbox({ memory: "256M", labels: { suite: "sdk-js" } });
    try {
      const r = await small.exec("python3 -c 'x = bytearray(600 << 20)'; echo rc=$?", { timeout: 120 });
      assert.equal(r.exit_code, 0);
      assert.match(r.stdout, /rc=137/);
      assert.equal(r.oom_killed, true);
      assert.equal((await small.exec("true", { timeout: 20 })).oom_killed, false);
    } finally {
      await small.delete().catch(() => {});
    }
  });

  test("execStream is an async iterator of events", async () => {
    const s = await sb.execStream("echo one; sleep 0.2; echo two >&2; printf '\\377'; exit 4", { timeout: 20 });
    const types = [];
    for await (const ev of s) types.push(ev.type);
    assert.equal(types[0], "start");
    assert.equal(types.at(-1), "exit");
    assert.ok(s.pid > 0);
    const res = await s.result();
    assert.equal(res.exit_code, 4);
    assert.equal(res.stderr, "two\n");
    assert.deepEqual(s.bytes("stdout"), Buffer.from("one\n\xff", "latin1"));
  });

  test("exec callbacks arrive while the command runs", async () => {
    const seen = [];
    const t0 = Date.now();
    const r = await sb.exec("echo first; sleep 1; echo second; echo e >&2", {
      timeout: 20,
      onStdout: (b) => seen.push([Date.now() - t0, b.toString()]),
      onStderr: (b) => seen.push([Date.now() - t0, "ERR:" + b.toString()]),
    });
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, "first\nsecond\n");
    const tFirst = seen.find(([, s]) => s.includes("first"))[0];
    const tSecond = seen.find(([, s]) => s.includes("second"))[0];
    assert.ok(tSecond - tFirst >= 500, JSON.stringify(seen));
    assert.ok(seen.some(([, s]) => s === "ERR:e\n"));
  });

  test("background process: stdin, wait, output, get, list", async () => {
    const p = await sb.processes.start(["cat"], { tag: "echoer" });
    assert.ok(p.pid > 0 && p.running && p.tag === "echoer");
    assert.ok((await sb.processes.list()).some((x) => x.pid === p.pid));
    assert.equal(await sb.processes.writeStdin(p.pid, "hello "), 6);
    assert.equal(await sb.processes.writeStdin(p.pid, (function* () { yield Buffer.from("wor"); yield Buffer.from("ld\n"); })(), { close: true }), 6);
    const ex = await sb.processes.wait(p.pid, 20);
    assert.equal(ex.exit_code, 0);
    const out = await sb.processes.output(p.pid);
    assert.equal(out.stdout, "hello world\n");
    assert.equal((await sb.processes.get(p.pid)).running, false);
  });

  test("closeStdin, signal, wait timeout (504), unknown pid", async () => {
    let p = await sb.processes.start("cat; echo done");
    await sb.processes.closeStdin(p.pid);
    assert.equal((await sb.processes.wait(p.pid, 20)).exit_code, 0);
    p = await sb.processes.start(["sleep", "60"]);
    await rejects(sb.processes.wait(p.pid, 0.3), isola.TimeoutError, (e) => assert.equal(e.status, 504));
    await sb.processes.signal(p.pid, "KILL");
    const ex = await sb.processes.wait(p.pid, 20);
    assert.equal(ex.signal, 9);
    await rejects(sb.processes.get(999999), isola.NotFoundError);
    await rejects(sb.processes.signal(p.pid, "NOSUCHSIG"), isola.InvalidError);
  });

  test("output stream with follow", async () => {
    const p = await sb.processes.start("for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 7");
    const s = await sb.processes.stream(p.pid, { follow: true, timeoutMs: 20000 });
    const res = await s.result();
    assert.equal(res.stdout, "line1\nline2\nline3\n");
    assert.equal(res.exit_code, 7);
  });

  test("PTY over WebSocket: input, resize (API and in-band), exit", async () => {
    const pty = await sb.pty("/bin/sh", { cols: 100, rows: 30 });
    try {
      pty.send("stty size\n");
      await pty.readUntil(/30 100/, 20000);
      const proc = (await sb.processes.list()).find((x) => x.tty && x.running);
      await sb.processes.resize(proc.pid, 120, 40);
      let mark = pty.output.length;
      pty.send("stty size\n");
      await pty.readUntil(/40 120/, 20000, mark);
      pty.resize(90, 20);
      mark = pty.output.length;
      pty.send("stty size\n");
      await pty.readUntil(/20 90/, 20000, mark);
      pty.send("exit 3\n");
      const ex = await pty.wait(20000);
      assert.equal(ex.exit_code, 3);
    } finally {
      pty.close();
    }
  });

  test("attach to a plain process; attach to an unknown pid", async () => {
    const p = await sb.processes.start("read x; echo got:$x");
    const s = await sb.attach(p.pid);
    try {
      s.send("abc\n");
      await s.readUntil("got:abc", 20000);
      assert.equal((await s.wait(20000)).exit_code, 0);
    } finally {
      s.close();
    }
    await rejects(sb.attach(999999), isola.NotFoundError);
  });
});

describe("files, archives, templates", () => {
  let sb;
  before(async () => {
    sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
  });
  after(async () => {
    await sb?.delete().catch(() => {});
  });

  test("write, read, ranges, stat, exists", async () => {
    const e = await sb.files.write("/tmp/a.txt", "hello world", { mode: 0o600 });
    assert.equal(e.type, "file");
    assert.equal(e.size, 11);
    assert.equal(e.mode & 0o777, 0o600);
    assert.equal(await sb.files.readText("/tmp/a.txt"), "hello world");
    assert.equal((await sb.files.read("/tmp/a.txt", { offset: 6, length: 3 })).toString(), "wor");
    assert.equal((await sb.files.read("/tmp/a.txt", { offset: 6 })).toString(), "world");
    assert.equal((await sb.files.read("/tmp/a.txt", { length: 2 })).toString(), "ld");
    await rejects(sb.files.read("/tmp/a.txt", { offset: 100, length: 1 }), isola.RangeNotSatisfiableError, (e) => assert.equal(e.status, 416));
    assert.equal((await sb.files.stat("/tmp/a.txt")).size, 11);
    assert.equal(await sb.files.exists("/tmp/a.txt"), true);
    assert.equal(await sb.files.exists("/tmp/none"), false);
    const big = randomBytes(300000);
    await sb.files.write("/tmp/big", big);
    assert.deepEqual(await sb.files.read("/tmp/big"), big);
    await sb.files.write("/tmp/gen", (async function* () { yield big.subarray(0, 1000); yield big.subarray(1000); })());
    assert.deepEqual(await sb.files.read("/tmp/gen"), big);
    await rejects(sb.files.read("/tmp/missing"), isola.NotFoundError);
    await rejects(sb.files.write("/tmp/no/parent/f", "x"), isola.NotFoundError);
  });

  test("mkdir parents, list depth, rename, remove recursive", async () => {
    await rejects(sb.files.mkdir("/tmp/p/q/r"), isola.NotFoundError);
    const d = await sb.files.mkdir("/tmp/p/q/r", { parents: true });
    assert.equal(d.type, "dir");
    await rejects(sb.files.mkdir("/tmp/p/q/r"), isola.ConflictError);
    await sb.files.write("/tmp/p/f1", "1");
    await sb.files.write("/tmp/p/q/f2", "22");
    const top = await sb.files.list("/tmp/p");
    assert.deepEqual(top.entries.map((e) => e.name).sort(), ["f1", "q"]);
    assert.equal(top.truncated, false);
    const deep = (await sb.files.list("/tmp/p", 3)).entries.map((e) => e.name);
    for (const n of ["f1", "q", "q/f2", "q/r"]) assert.ok(deep.includes(n), deep.join(","));
    const moved = await sb.files.rename("/tmp/p/f1", "/tmp/p/q/f1");
    assert.equal(moved.path, "/tmp/p/q/f1");
    await rejects(sb.files.rename("/tmp/p/q/f1", "/tmp/p/q/f2"), isola.ConflictError);
    await sb.files.rename("/tmp/p/q/f1", "/tmp/p/q/f2", { overwrite: true });
    assert.equal(await sb.files.readText("/tmp/p/q/f2"), "1");
    await sb.files.remove("/tmp/p", { recursive: true });
    assert.equal(await sb.files.exists("/tmp/p"), false);
    await rejects(sb.files.remove("/tmp/p"), isola.NotFoundError);
  });

  test("uploadDir and downloadDir round trip", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "isola-sdkjs-"));
    try {
      const src = join(tmp, "src");
      mkdirSync(join(src, "sub", "deeper"), { recursive: true });
      writeFileSync(join(src, "a.txt"), "alpha");
      chmodSync(join(src, "a.txt"), 0o755);
      const blob = randomBytes(70000);
      writeFileSync(join(src, "sub", "b.bin"), blob);
      const long = "n".repeat(120);
      writeFileSync(join(src, "sub", "deeper", long), "long name");
      symlinkSync("a.txt", join(src, "link"));
      await sb.files.mkdir("/tmp/up");
      const res = await sb.files.uploadDir(src, "/tmp/up");
      assert.ok(res.entries >= 6 && res.bytes >= 70000, JSON.stringify(res));
      assert.deepEqual(await sb.files.read("/tmp/up/sub/b.bin"), blob);
      assert.equal(await sb.files.readText(`/tmp/up/sub/deeper/${long}`), "long name");
      assert.equal((await sb.files.stat("/tmp/up/link")).type, "symlink");
      assert.equal((await sb.files.stat("/tmp/up/a.txt")).mode & 0o777, 0o755);
      const dst = join(tmp, "dst");
      const names = await sb.files.downloadDir("/tmp/up", dst);
      assert.ok(names.includes("a.txt") && names.includes(`sub/deeper/${long}`), names.join(","));
      assert.equal(readFileSync(join(dst, "a.txt"), "utf8"), "alpha");
      assert.deepEqual(readFileSync(join(dst, "sub", "b.bin")), blob);
      assert.equal(readlinkSync(join(dst, "link")), "a.txt");
      assert.equal(statSync(join(dst, "a.txt")).mode & 0o777, 0o755);
      await rejects(sb.files.downloadArchive("/tmp/nothing-here"), isola.NotFoundError);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  test("templates: list, import with progress, use, remove", async () => {
    assert.ok((await client.listTemplates()).some((t) => t.name === "host"));
    const progress = [];
    const t = await client.importTemplate("sdkjs-hello", process.env.ISOLA_TEST_IMAGE, { onProgress: (p) => progress.push(p) });
    try {
      assert.equal(t.name, "sdkjs-hello");
      assert.ok(progress.every((p) => typeof p.phase === "string"));
      assert.ok((await client.listTemplates()).some((x) => x.name === "sdkjs-hello"));
      const tsb = await client.createSandbox({ template: "sdkjs-hello" });
      try {
        assert.equal((await tsb.exec(["/hello"], { timeout: 20 })).stdout, "hello from template\n");
        await rejects(client.deleteTemplate("sdkjs-hello"), isola.ConflictError);
      } finally {
        await tsb.delete();
      }
    } finally {
      await client.deleteTemplate("sdkjs-hello");
    }
    await rejects(client.deleteTemplate("sdkjs-hello"), isola.NotFoundError);
    await rejects(client.importTemplate("sdkjs-bad", Buffer.from("not a tar".repeat(100))), isola.IsolaError);
    await rejects(client.importTemplate(".bad", Buffer.from("x")), isola.InvalidError);
  });
});

describe("downloadDir from a hostile daemon (tests/integration/fake_isolad.py)", () => {
  const PRECIOUS = "precious, must not change\n";
  const FAKE = new URL("../integration/fake_isolad.py", import.meta.url).pathname;

  async function serve(dir, kase, outside) {
    const { spawn } = await import("node:child_process");
    const sock = join(dir, `${kase}.sock`);
    const p = spawn("/usr/bin/python3", [FAKE, sock, kase, outside], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((res, rej) => {
      p.stdout.once("data", res);
      p.once("exit", (c) => rej(new Error(`fake_isolad exited ${c}`)));
    });
    return { p, client: new isola.Client({ socketPath: sock, timeout: 30000 }) };
  }

  for (const [kase, refused] of [["hardlink-with-data", true], ["tmp-symlink", false], ["symlink-then-file", true], ["dotdot", true], ["cut", true]]) {
    test(`${kase}: victims untouched, ${refused ? "refused, nothing merged" : "extracted"}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "isola-sdkjs-hostile-"));
      const outside = join(dir, "outside");
      const dst = join(dir, "dst");
      mkdirSync(outside);
      mkdirSync(dst);
      writeFileSync(join(outside, "victim.txt"), PRECIOUS);
      writeFileSync(join(dst, "victim.txt"), PRECIOUS);
      const { p, client: c } = await serve(dir, kase, outside);
      try {
        const sb = c.sandbox("sb1");
        if (refused) await rejects(sb.files.downloadDir("/out", dst), isola.IsolaError);
        else await sb.files.downloadDir("/out", dst);
        assert.equal(readFileSync(join(outside, "victim.txt"), "utf8"), PRECIOUS);
        assert.equal(readFileSync(join(dst, "victim.txt"), "utf8"), PRECIOUS);
        const { readdirSync } = await import("node:fs");
        assert.deepEqual(readdirSync(outside), ["victim.txt"], "written outside the destination");
        if (refused) assert.deepEqual(readdirSync(dst), ["victim.txt"], "a refused download changed localDir");
        assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith(".isola-dl-")), [], "temporary directory left");
      } finally {
        p.kill();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe("directory transfers of 20,000 files", () => {
  // Same trees and manifests as tests/integration/test_cp_stream.py (transfer_util.py).
  const UTIL = new URL("../integration/transfer_util.py", import.meta.url).pathname;
  const py = (name) => {
    const src = readFileSync(UTIL, "utf8");
    const m = src.match(new RegExp(`${name} = r"""([\\s\\S]*?)"""`));
    return m[1];
  };

  async function localManifest(root) {
    const { createHash } = await import("node:crypto");
    const { readdirSync } = await import("node:fs");
    const { relative } = await import("node:path");
    const out = {};
    const walk = (d) => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, e.name);
        if (e.isDirectory()) walk(p);
        else out[relative(root, p)] = createHash("sha256").update(readFileSync(p)).digest("hex");
      }
    };
    walk(root);
    return out;
  }

  async function remoteManifest(sb, p) {
    const r = await sb.exec(["python3", "-c", py("MANIFEST_PY"), p, "/tmp/manifest.json"], { timeout: 600 });
    assert.equal(r.exit_code, 0, r.stderr);
    return JSON.parse(await sb.files.readText("/tmp/manifest.json"));
  }

  test("downloadDir and uploadDir: checksums equal both ways", async () => {
    const sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
    const dir = mkdtempSync(join(tmpdir(), "isola-sdkjs-many-"));
    try {
      const r = await sb.exec(["python3", "-c", py("MAKE_MANY_PY"), "/tmp/many", "20000", "1024"], { timeout: 600 });
      assert.equal(r.exit_code, 0, r.stderr);
      const want = await remoteManifest(sb, "/tmp/many");
      assert.equal(Object.keys(want).length, 20000);
      await sb.files.downloadDir("/tmp/many", join(dir, "back"));
      assert.deepEqual(await localManifest(join(dir, "back")), want);
      await sb.files.mkdir("/tmp/up");
      await sb.files.uploadDir(join(dir, "back"), "/tmp/up");
      assert.deepEqual(await remoteManifest(sb, "/tmp/up"), want);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await sb.delete().catch(() => {});
    }
  });
});
