// SPDX-License-Identifier: Apache-2.0
// `isola mcp` as a coding agent uses it (issue 16): concurrent calls, cancellation that kills the
// command, progress, bounded output saved in the sandbox and paged, every tool's schema compiled and
// its effect checked, the session's default sandbox, host transfer limits, resources.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Ajv from "ajv";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { until } from "./until.mjs";

const CLI = process.env.ISOLA_CLI_BIN;
const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(CLI && SOCKET, "run through tests/mcp/run.sh");

async function connect(extra = []) {
  const transport = new StdioClientTransport({ command: CLI, args: ["--socket", SOCKET, "mcp", ...extra], stderr: "inherit" });
  const client = new Client({ name: "isola-mcp-agent-test", version: "0.0.0" });
  await client.connect(transport, { timeout: 20000 });
  await client.listTools(); // caches the output schemas: every later callTool validates structuredContent
  return client;
}

function text(res) {
  assert.ok(Array.isArray(res.content) && res.content.length >= 1, JSON.stringify(res));
  assert.equal(res.content[0].type, "text");
  return res.content[0].text;
}


describe("isola mcp for agents", () => {
  let client, hostDir, sid;
  const call = (name, args, opts = {}) => client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts });

  before(async () => {
    hostDir = mkdtempSync(join(tmpdir(), "isola-mcp-host-"));
    client = await connect(["--allow-host-path", hostDir]);
  });
  after(async () => {
    await client?.close();
    rmSync(hostDir, { recursive: true, force: true });
  });

  test("every tool: a compilable input schema, annotations with all four hints", async () => {
    const { tools } = await client.listTools();
    const ajv = new Ajv({ strict: false });
    for (const t of tools) {
      assert.doesNotThrow(() => ajv.compile(t.inputSchema), t.name);
      if (t.outputSchema) assert.doesNotThrow(() => ajv.compile(t.outputSchema), t.name);
      for (const h of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"])
        assert.equal(typeof t.annotations?.[h], "boolean", `${t.name}.${h}`);
    }
    const by = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const n of ["sandbox_list", "sandbox_read_file", "sandbox_search", "sandbox_process_list", "sandbox_list_files"])
      assert.equal(by[n].annotations.readOnlyHint, true, n);
    for (const n of ["sandbox_destroy", "sandbox_remove", "sandbox_edit_file", "sandbox_process_kill"])
      assert.deepEqual([by[n].annotations.readOnlyHint, by[n].annotations.destructiveHint], [false, true], n);
    assert.equal(by.sandbox_create.annotations.destructiveHint, false);
    for (const n of ["sandbox_run_command", "sandbox_create", "sandbox_list", "sandbox_search", "sandbox_list_files"])
      assert.ok(by[n].outputSchema, n);
  });

  test("create with limits and a network allowlist", async () => {
    const r = await call("sandbox_create", { network_allow: ["example.com", "203.0.113.0/24:443"], pids: 64, cpu: 0.5, labels: { suite: "mcp-agent" } });
    assert.equal(r.isError, false, text(r));
    const id = r.structuredContent.id;
    assert.deepEqual([r.structuredContent.pids, r.structuredContent.cpu], [64, 0.5]);
    const net = JSON.parse(execFileSync(CLI, ["--socket", SOCKET, "--json", "network", "get", id], { encoding: "utf8" }));
    assert.equal(net.policy.default, "deny");
    assert.deepEqual(net.policy.allow.map((x) => x.domain || x.cidr), ["example.com", "203.0.113.0/24"]);
    assert.equal((await call("sandbox_destroy", { sandbox_id: id })).isError, false);
  });

  test("no sandbox_id: the session's default sandbox is made once and reused", async () => {
    const [a, b] = await Promise.all([
      call("sandbox_run_command", { command: "echo one > /tmp/shared" }),
      call("sandbox_run_command", { command: "true" }),
    ]);
    assert.equal(a.isError, false, text(a));
    sid = a.structuredContent.sandbox_id;
    assert.equal(b.structuredContent.sandbox_id, sid, "concurrent first calls share one sandbox");
    const l = await call("sandbox_list", { labels: { "isola-mcp": "session-default" } });
    assert.deepEqual(l.structuredContent.sandboxes.map((s) => s.id), [sid]);
    assert.equal(text(await call("sandbox_read_file", { path: "/tmp/shared" })), "one\n");
  });

  test("concurrency: a list answers while an 8 s command runs", async () => {
    let runDone = false;
    const run = call("sandbox_run_command", { command: "sleep 8; echo slept" }).then((r) => {
      runDone = true;
      return r;
    });
    const l = await call("sandbox_list", {});
    assert.ok(l.structuredContent.sandboxes.some((s) => s.id === sid));
    assert.equal(runDone, false, "sandbox_list waited for the running command");
    assert.match(text(await run), /slept/);
  });

  test("cancellation: notifications/cancelled kills the command in the sandbox", async () => {
    const ac = new AbortController();
    const run = call("sandbox_run_command", { command: "exec sleep 301" }, { signal: ac.signal });
    const proc = await until(async () => {
      const ps = await call("sandbox_process_list", {});
      return ps.structuredContent.processes.find((p) => p.running && (p.argv || []).join(" ").includes("sleep 301"));
    }, "the command runs");
    const ps0 = text(await call("sandbox_process_list", {}));
    assert.match(ps0, new RegExp(`^${proc.pid}\\s+running`, "m"));
    ac.abort("test");
    await assert.rejects(run); // the SDK rejects at once; the server sends no answer
    await until(async () => {
      const ps = await call("sandbox_process_list", {});
      const p = ps.structuredContent.processes.find((x) => x.pid === proc.pid);
      return !p || !p.running;
    }, `pid ${proc.pid} is gone after the cancellation`);
    // The session still works.
    assert.equal(text(await call("sandbox_run_command", { command: "echo after" })).includes("after"), true);
  });

  test("progress notifications for a long command when the client sent a progressToken", async () => {
    const seen = [];
    const res = await call("sandbox_run_command", { command: "echo tick; sleep 3; echo tock" }, { onprogress: (p) => seen.push(p) });
    assert.match(text(res), /tick\ntock/);
    assert.ok(seen.length >= 1, "no progress notification");
    assert.match(seen[0].message, /running for \d+ s, \d+ bytes of output/);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, "progress increases");
  });

  test("bounded output: seq 1 200000 keeps head and tail, saves all, pages the tail", async () => {
    const res = await call("sandbox_run_command", { command: "seq 1 200000" });
    const t = text(res);
    const total = 1288895; // bytes of `seq 1 200000`
    assert.ok(t.length < 20000, `${t.length} characters reached the model`);
    assert.ok(t.includes("--- stdout (1288895 bytes) ---\n1\n2\n3\n"), t.slice(0, 200));
    assert.ok(t.includes("199999\n200000\n--- stderr (0 bytes) ---"), t.slice(-300));
    const m = t.match(/\[\.\.\. (\d+) bytes elided: (\d+) bytes in total, the first (\d+) and the last (\d+) shown\. The whole output is in the sandbox at (\S+):/);
    assert.ok(m, t.slice(8000, 8600));
    assert.equal(Number(m[2]), total);
    assert.equal(Number(m[1]) + Number(m[3]) + Number(m[4]), total);
    const file = res.structuredContent.stdout_file;
    assert.equal(file, m[5]);
    assert.equal(res.structuredContent.stdout_bytes, total);
    const page = text(await call("sandbox_read_file", { path: file, start_line: 199996, end_line: 200000 }));
    assert.ok(page.startsWith("199996\n199997\n199998\n199999\n200000\n\n[lines 199996-200000 of 200000;"), page);
    const mid = text(await call("sandbox_read_file", { path: file, start_line: 100000, end_line: 100001 }));
    assert.ok(mid.startsWith("100000\n100001\n"), mid);
    const bytes = text(await call("sandbox_read_file", { path: file, offset: total - 7, max_bytes: 7 }));
    assert.ok(bytes.startsWith("200000\n"), bytes);
    const wc = text(await call("sandbox_run_command", { argv: ["wc", "-c", file] }));
    assert.match(wc, new RegExp(`^${total} `, "m"));
  });

  test("edit: exact replace; 0 or more than 1 match fails naming the count", async () => {
    await call("sandbox_write_file", { path: "/tmp/e.txt", content: "alpha\nbeta\nalpha\n" });
    let r = await call("sandbox_edit_file", { path: "/tmp/e.txt", old_string: "alpha", new_string: "x" });
    assert.equal(r.isError, true);
    assert.match(text(r), /matches 2 times in `\/tmp\/e.txt`/);
    r = await call("sandbox_edit_file", { path: "/tmp/e.txt", old_string: "gamma", new_string: "x" });
    assert.equal(r.isError, true);
    assert.match(text(r), /matches 0 times/);
    assert.equal(text(await call("sandbox_read_file", { path: "/tmp/e.txt" })), "alpha\nbeta\nalpha\n", "a failed edit changes nothing");
    r = await call("sandbox_edit_file", { path: "/tmp/e.txt", old_string: "beta\n", new_string: "BETA\nmore\n" });
    assert.equal(r.isError, false, text(r));
    r = await call("sandbox_edit_file", { path: "/tmp/e.txt", old_string: "alpha", new_string: "A", replace_all: true });
    assert.match(text(r), /Replaced 2 occurrences/);
    assert.equal(text(await call("sandbox_read_file", { path: "/tmp/e.txt" })), "A\nBETA\nmore\nA\n");
  });

  test("mkdir, list with glob, search (bounded), remove", async () => {
    let r = await call("sandbox_mkdir", { path: "/tmp/g/x/y" });
    assert.equal(r.isError, false, text(r));
    await call("sandbox_write_file", { path: "/tmp/g/x/y/f.py", content: "def hello():\n    pass\n" });
    await call("sandbox_write_file", { path: "/tmp/g/x/notes.txt", content: "def hello in text\n" });
    r = await call("sandbox_list_files", { path: "/tmp/g", depth: 4, glob: "*.py" });
    assert.deepEqual(r.structuredContent.entries.map((e) => e.path), ["/tmp/g/x/y/f.py"]);
    r = await call("sandbox_search", { pattern: "def h.llo", path: "/tmp/g", glob: "*.py" });
    assert.deepEqual(r.structuredContent.matches, ["/tmp/g/x/y/f.py:1:def hello():"]);
    r = await call("sandbox_search", { pattern: "HELLO", path: "/tmp/g", ignore_case: true });
    assert.equal(r.structuredContent.matches.length, 2);
    r = await call("sandbox_search", { pattern: "^1", path: "/tmp", glob: "run-*", max_results: 5 });
    assert.equal(r.structuredContent.matches.length, 5);
    assert.equal(r.structuredContent.more, true);
    assert.match(text(r), /more matches: only the first 5/);
    r = await call("sandbox_search", { pattern: "nothing-matches-this", path: "/tmp/g" });
    assert.deepEqual([r.isError, text(r)], [false, "No matches.\n"]);
    r = await call("sandbox_remove", { path: "/tmp/g" });
    assert.equal(r.isError, true, "a directory needs recursive");
    r = await call("sandbox_remove", { path: "/tmp/g", recursive: true });
    assert.equal(r.isError, false, text(r));
    r = await call("sandbox_list_files", { path: "/tmp/g" });
    assert.equal(r.isError, true);
  });

  test("background process: list, logs, kill", async () => {
    let r = await call("sandbox_run_command", { command: "echo started; exec sleep 302", background: true });
    assert.equal(r.isError, false, text(r));
    const pid = r.structuredContent.pid;
    assert.ok(pid > 0);
    await until(async () => text(await call("sandbox_process_logs", { pid })).includes("started"), "the output shows");
    r = await call("sandbox_process_list", {});
    assert.ok(r.structuredContent.processes.find((p) => p.pid === pid && p.running));
    r = await call("sandbox_process_kill", { pid, signal: "KILL" });
    assert.equal(r.isError, false, text(r));
    await until(async () => {
      const ps = await call("sandbox_process_list", {});
      return !ps.structuredContent.processes.find((p) => p.pid === pid && p.running);
    }, "the killed process is gone");
  });

  test("upload/download only inside --allow-host-path, after realpath", async () => {
    writeFileSync(join(hostDir, "in.txt"), "from the host\n");
    let r = await call("sandbox_upload", { host_path: join(hostDir, "in.txt"), path: "/tmp/up/in.txt" });
    assert.equal(r.isError, false, text(r));
    assert.equal(text(await call("sandbox_read_file", { path: "/tmp/up/in.txt" })), "from the host\n");
    r = await call("sandbox_download", { path: "/tmp/e.txt", host_path: join(hostDir, "out.txt") });
    assert.equal(r.isError, false, text(r));
    assert.equal(readFileSync(join(hostDir, "out.txt"), "utf8"), "A\nBETA\nmore\nA\n");
    r = await call("sandbox_upload", { host_path: "/etc/passwd", path: "/tmp/p" });
    assert.equal(r.isError, true);
    assert.match(text(r), /outside the directories the operator allowed/);
    symlinkSync("/etc/passwd", join(hostDir, "link"));
    r = await call("sandbox_upload", { host_path: join(hostDir, "link"), path: "/tmp/p" });
    assert.match(text(r), /outside the directories/);
    r = await call("sandbox_upload", { host_path: join(hostDir, "..", "..", "etc", "passwd"), path: "/tmp/p" });
    assert.match(text(r), /outside the directories/);
    r = await call("sandbox_download", { path: "/tmp/e.txt", host_path: join(hostDir, "..", "escape.txt") });
    assert.match(text(r), /outside the directories/);
    r = await call("sandbox_download", { path: "/tmp/e.txt", host_path: join(hostDir, "link") });
    assert.equal(r.isError, true, "a symlink at the destination is not followed");
    assert.equal(readFileSync("/etc/passwd", "utf8").includes("BETA"), false);
  });

  test("expose port: a server in the sandbox answers at the returned URL", async () => {
    await call("sandbox_write_file", { path: "/tmp/www/hello.txt", content: "hello from the sandbox\n" });
    let r = await call("sandbox_run_command", {
      command: "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www",
      background: true,
    });
    assert.equal(r.isError, false, text(r));
    const probe = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/hello.txt').read().decode())";
    await until(async () => !(await call("sandbox_run_command", { argv: ["python3", "-c", probe] })).isError, "the server answers inside");
    r = await call("sandbox_expose_port", { port: 8000 });
    assert.equal(r.isError, false, text(r));
    const x = r.structuredContent;
    assert.equal(x.port, 8000);
    assert.ok(x.token, "a private port has an access token");
    assert.ok(x.path_url.startsWith(`http://127.0.0.1:${process.env.ISOLA_TEST_EXPOSE_PORT}/`), x.path_url);
    assert.ok(text(r).includes(x.url) && text(r).includes(x.token));
    let resp = await fetch(x.path_url + "hello.txt", { headers: { "X-Isola-Access-Token": x.token } });
    assert.equal(resp.status, 200);
    assert.equal(await resp.text(), "hello from the sandbox\n");
    resp = await fetch(x.path_url + "hello.txt");
    assert.notEqual(resp.status, 200, "no token, no answer");
    await call("sandbox_process_kill", { pid: (await call("sandbox_process_list", {})).structuredContent.processes.find((p) => p.running && (p.argv || []).join(" ").includes("http.server")).pid, signal: "KILL" });
  });

  test("resources: the default sandbox's files, read by isola://sandbox/ID/PATH", async () => {
    await call("sandbox_write_file", { path: "notes.txt", content: "resource text\n" });
    const { resources } = await client.listResources();
    const res = resources.find((x) => x.uri.startsWith(`isola://sandbox/${sid}/`) && x.uri.endsWith("/notes.txt"));
    assert.ok(res, JSON.stringify(resources));
    const got = await client.readResource({ uri: res.uri });
    assert.equal(got.contents[0].text, "resource text\n");
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.equal(resourceTemplates[0].uriTemplate, "isola://sandbox/{sandbox_id}/{+path}");
    const up = await client.readResource({ uri: `isola://sandbox/${sid}/tmp/up/in.txt` });
    assert.equal(up.contents[0].text, "from the host\n");
    await assert.rejects(client.readResource({ uri: "file:///etc/passwd" }), /isola:\/\/sandbox/);
  });
});

describe("isola mcp sessions", () => {
  test("the default sandbox goes when the client disconnects; --keep keeps it; no host paths by default", async () => {
    const ids = [];
    for (const extra of [[], ["--keep"]]) {
      const c = await connect(extra);
      const r = await c.callTool({ name: "sandbox_run_command", arguments: { command: "true" } });
      ids.push(r.structuredContent.sandbox_id);
      if (!extra.length) {
        const u = await c.callTool({ name: "sandbox_upload", arguments: { host_path: "/etc/hostname", path: "/tmp/h" } });
        assert.equal(u.isError, true);
        assert.match(text(u), /host file transfer is off/);
      }
      await c.close();
    }
    const c = await connect();
    try {
      await until(async () => {
        const l = await c.callTool({ name: "sandbox_list", arguments: {} });
        return !l.structuredContent.sandboxes.some((s) => s.id === ids[0]);
      }, "the default sandbox is destroyed at disconnect");
      const l = await c.callTool({ name: "sandbox_list", arguments: {} });
      assert.ok(l.structuredContent.sandboxes.some((s) => s.id === ids[1]), "--keep kept it");
      await c.callTool({ name: "sandbox_destroy", arguments: { sandbox_id: ids[1] } });
    } finally {
      await c.close();
    }
  });
});
