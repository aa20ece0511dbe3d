// SPDX-License-Identifier: Apache-2.0
// `isola mcp` (src/cli/cmd_mcp.c) driven by the official MCP TypeScript SDK client over stdio,
// against a real isolad started by run.sh; plus raw JSON-RPC checks of the protocol edges.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const CLI = process.env.ISOLA_CLI_BIN;
const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(CLI && SOCKET, "run through tests/mcp/run.sh");

const TOOLS = [
  "sandbox_create",
  "sandbox_destroy",
  "sandbox_download",
  "sandbox_edit_file",
  "sandbox_expose_port",
  "sandbox_fork",
  "sandbox_list",
  "sandbox_list_files",
  "sandbox_mkdir",
  "sandbox_process_kill",
  "sandbox_process_list",
  "sandbox_process_logs",
  "sandbox_read_file",
  "sandbox_remove",
  "sandbox_run_code",
  "sandbox_run_command",
  "sandbox_search",
  "sandbox_snapshot",
  "sandbox_upload",
  "sandbox_write_file",
];

function text(res) {
  assert.ok(Array.isArray(res.content) && res.content.length === 1, JSON.stringify(res));
  assert.equal(res.content[0].type, "text");
  return res.content[0].text;
}

describe("isola mcp with the official SDK client", () => {
  let client, transport, sid;
  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 60000 });

  before(async () => {
    transport = new StdioClientTransport({ command: CLI, args: ["--socket", SOCKET, "mcp"], stderr: "inherit" });
    client = new Client({ name: "isola-mcp-test", version: "0.0.0" });
    await client.connect(transport, { timeout: 20000 });
  });
  after(async () => {
    await client?.close();
  });

  test("initialize negotiated the SDK's version and named the server", () => {
    assert.equal(client.getServerVersion().name, "isola");
    assert.ok(client.getServerCapabilities().tools);
    assert.ok(client.getInstructions()?.includes("sandbox_create"));
    assert.equal(transport._process?.exitCode ?? null, null);
  });

  test("ping", async () => {
    assert.deepEqual(await client.ping(), {});
  });

  test("tools/list: every tool with an object inputSchema", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    for (const t of tools) {
      assert.equal(t.inputSchema.type, "object", t.name);
      assert.ok(t.description.length > 20, t.name);
    }
    const run = tools.find((t) => t.name === "sandbox_run_command");
    assert.equal(run.inputSchema.required, undefined, "sandbox_id is optional: the default sandbox");
    assert.ok(run.inputSchema.properties.command && run.inputSchema.properties.timeout);
  });

  test("sandbox_create", async () => {
    const res = await call("sandbox_create", { labels: { suite: "mcp" }, memory: "256M" });
    assert.equal(res.isError, false);
    const m = text(res).match(/^Created sandbox ([a-z0-9-]+) /);
    assert.ok(m, text(res));
    sid = m[1];
  });

  test("sandbox_list (with and without labels)", async () => {
    assert.ok(text(await call("sandbox_list", { labels: { suite: "mcp" } })).includes(sid));
    assert.ok(text(await call("sandbox_list", {})).includes(sid));
    assert.equal(text(await call("sandbox_list", { labels: { suite: "none" } })), "(no sandboxes)\n");
  });

  test("sandbox_run_command: output, exit code, isError, timeout, argv, stdin", async () => {
    let res = await call("sandbox_run_command", { sandbox_id: sid, command: "echo hi; echo oops >&2" });
    assert.equal(res.isError, false);
    assert.equal(text(res), "exit_code: 0\n--- stdout (3 bytes) ---\nhi\n--- stderr (5 bytes) ---\noops\n");
    assert.deepEqual(
      [res.structuredContent.exit_code, res.structuredContent.stdout_bytes, res.structuredContent.sandbox_id],
      [0, 3, sid],
    );
    res = await call("sandbox_run_command", { sandbox_id: sid, command: "exit 7" });
    assert.equal(res.isError, true);
    assert.match(text(res), /^exit_code: 7\n/);
    res = await call("sandbox_run_command", { sandbox_id: sid, command: "sleep 30", timeout: 1 });
    assert.equal(res.isError, true);
    assert.match(text(res), /timed out after 1 s/);
    res = await call("sandbox_run_command", { sandbox_id: sid, argv: ["cat"], stdin: "piped", cwd: "/tmp", env: { A: "b" } });
    assert.match(text(res), /--- stdout \(5 bytes\) ---\npiped\n/);
  });

  test("sandbox_write_file, sandbox_read_file (text, base64, max_bytes)", async () => {
    let res = await call("sandbox_write_file", { sandbox_id: sid, path: "/tmp/m/deep/er/x.txt", content: "x" });
    assert.equal(res.isError, false, "missing parents are made");
    assert.equal(text(await call("sandbox_read_file", { sandbox_id: sid, path: "/tmp/m/deep/er/x.txt" })), "x");
    await call("sandbox_remove", { sandbox_id: sid, path: "/tmp/m/deep", recursive: true });
    res = await call("sandbox_write_file", { sandbox_id: sid, path: "/tmp/m/hello.txt", content: "héllo\nworld\n" });
    assert.equal(res.isError, false);
    assert.match(text(res), /^Wrote 13 bytes to \/tmp\/m\/hello.txt/);
    assert.equal(text(await call("sandbox_read_file", { sandbox_id: sid, path: "/tmp/m/hello.txt" })), "héllo\nworld\n");
    res = await call("sandbox_write_file", { sandbox_id: sid, path: "/tmp/m/bin", content: Buffer.from([0, 255, 1]).toString("base64"), encoding: "base64" });
    assert.match(text(res), /^Wrote 3 bytes/);
    assert.equal(text(await call("sandbox_read_file", { sandbox_id: sid, path: "/tmp/m/bin" })), "[binary, 3 bytes, base64]\nAP8B");
    res = await call("sandbox_read_file", { sandbox_id: sid, path: "/tmp/m/hello.txt", max_bytes: 3 });
    assert.match(text(res), /^hé\n\[bytes 0-3 shown; the file goes on: read on with offset 3/);
    res = await call("sandbox_read_file", { sandbox_id: sid, path: "/tmp/m/none" });
    assert.equal(res.isError, true);
    assert.match(text(res), /not_found/);
  });

  test("sandbox_list_files", async () => {
    await call("sandbox_run_command", { sandbox_id: sid, command: "mkdir -p /tmp/m/sub && echo 1 > /tmp/m/sub/f" });
    let t = text(await call("sandbox_list_files", { sandbox_id: sid, path: "/tmp/m" }));
    assert.match(t, /^file\s+13\s+\/tmp\/m\/hello.txt$/m);
    assert.match(t, /^dir\s+\d+\s+\/tmp\/m\/sub\/$/m);
    assert.doesNotMatch(t, /sub\/f/);
    t = text(await call("sandbox_list_files", { sandbox_id: sid, path: "/tmp/m", depth: 2 }));
    assert.match(t, /\/tmp\/m\/sub\/f$/m);
  });

  test("invalid arguments are JSON-RPC errors; unknown tool too", async () => {
    await assert.rejects(call("sandbox_run_command", { sandbox_id: sid }), /-32602|exactly one of/);
    await assert.rejects(call("sandbox_read_file", { sandbox_id: sid }), /path/);
    await assert.rejects(call("sandbox_run_command", { sandbox_id: sid, command: "true", timeout: 99999 }), /timeout/);
    await assert.rejects(call("sandbox_snapshot", { sandbox_id: sid }), /name/);
    await assert.rejects(call("sandbox_fork", { sandbox_id: sid, count: 99 }), /count/);
    await assert.rejects(call("sandbox_teleport", { sandbox_id: sid }), /unknown tool/);
  });

  test("sandbox_snapshot, sandbox_create from it, sandbox_fork", async () => {
    const name = `mcp-${process.pid}`;
    await call("sandbox_write_file", { sandbox_id: sid, path: "/tmp/m/state", content: "kept" });
    let res = await call("sandbox_snapshot", { sandbox_id: sid, name });
    assert.equal(res.isError, false, text(res));
    assert.ok(text(res).startsWith(`Took snapshot \`${name}\` of sandbox ${sid} (files`), text(res));
    res = await call("sandbox_create", { snapshot: name, labels: { suite: "mcp" } });
    assert.equal(res.isError, false, text(res));
    const copy = text(res).match(/^Created sandbox ([a-z0-9-]+) /)[1];
    assert.equal(text(await call("sandbox_read_file", { sandbox_id: copy, path: "/tmp/m/state" })), "kept");
    res = await call("sandbox_fork", { sandbox_id: copy, count: 2 });
    assert.equal(res.isError, false, text(res));
    const kids = text(res).trim().split("\n").slice(1);
    assert.equal(kids.length, 2, text(res));
    for (const k of kids) {
      assert.equal(text(await call("sandbox_read_file", { sandbox_id: k, path: "/tmp/m/state" })), "kept");
      await call("sandbox_destroy", { sandbox_id: k });
    }
    await call("sandbox_destroy", { sandbox_id: copy });
    res = await call("sandbox_snapshot", { sandbox_id: sid, name });
    assert.equal(res.isError, true, "a snapshot name is taken once");
  });

  test("sandbox_destroy, then the id is unknown", async () => {
    let res = await call("sandbox_destroy", { sandbox_id: sid });
    assert.equal(res.isError, false);
    assert.equal(text(res), `Destroyed sandbox ${sid}.`);
    res = await call("sandbox_run_command", { sandbox_id: sid, command: "true" });
    assert.equal(res.isError, true);
    assert.match(text(res), /sandbox_ended/); // its tombstone says why (docs/tombstones.md)
    assert.match(text(res), /was destroyed at/);
    assert.ok(!text(await call("sandbox_list", {})).includes(sid));
  });
});

describe("isola mcp raw JSON-RPC", () => {
  // One line out, one line back; bounded.
  async function session(lines, expect) {
    const p = spawn(CLI, ["--socket", SOCKET, "mcp"], { stdio: ["pipe", "pipe", "inherit"] });
    const rl = createInterface({ input: p.stdout });
    const got = [];
    const done = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${got.length} replies: ${JSON.stringify(got)}`)), 20000);
      rl.on("line", (l) => {
        got.push(JSON.parse(l));
        if (got.length === expect) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    for (const l of lines) p.stdin.write(typeof l === "string" ? l + "\n" : JSON.stringify(l) + "\n");
    await done;
    p.stdin.end();
    const code = await new Promise((r) => p.on("exit", r));
    assert.equal(code, 0, "exits 0 at EOF");
    return got;
  }

  test("version negotiation: a supported version is echoed, another gets the latest", async () => {
    const init = (v, id) => ({ jsonrpc: "2.0", id, method: "initialize", params: { protocolVersion: v, capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    const r = await session([init("2025-06-18", 1), init("2024-11-05", 2), init("1999-01-01", 3)], 3);
    assert.deepEqual(r.map((x) => x.result.protocolVersion), ["2025-06-18", "2024-11-05", "2025-11-25"]);
    assert.equal(r[0].result.serverInfo.name, "isola");
  });

  test("parse error, batch, unknown method, notifications get no reply", async () => {
    const r = await session(
      [
        "{not json",
        [{ jsonrpc: "2.0", id: 1, method: "ping" }],
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: "a", method: "prompts/list" },
        { jsonrpc: "1.0", id: 5, method: "ping" },
        { jsonrpc: "2.0", id: 6, method: "ping" },
      ],
      5,
    );
    assert.equal(r[0].error.code, -32700);
    assert.equal(r[0].id, null);
    assert.equal(r[1].error.code, -32600);
    assert.deepEqual([r[2].id, r[2].error.code], ["a", -32601]);
    assert.deepEqual([r[3].id, r[3].error.code], [5, -32600]);
    assert.deepEqual(r[4], { jsonrpc: "2.0", id: 6, result: {} });
  });

  test("EOF right after a request: the call in flight is still answered", () => {
    const req = { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "sandbox_run_command", arguments: { command: "sleep 1; echo late" } } };
    const p = spawnSync(CLI, ["--socket", SOCKET, "mcp"], { input: JSON.stringify(req) + "\n", encoding: "utf8", timeout: 60000 });
    assert.equal(p.status, 0, p.stderr);
    const answer = JSON.parse(p.stdout.trim());
    assert.equal(answer.id, 9);
    assert.match(answer.result.content[0].text, /late/);
  });
});
