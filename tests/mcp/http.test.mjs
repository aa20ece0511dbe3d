// SPDX-License-Identifier: Apache-2.0
// isolad's /mcp (Streamable HTTP, src/isolad/api/mcphttp.c) driven by the official SDK's
// StreamableHTTPClientTransport against the real isolad run.sh starts; plus raw HTTP checks of
// auth, Origin, session binding and the session's end.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { until } from "./until.mjs";

const URL_ = process.env.ISOLA_TEST_URL;
const ADMIN = process.env.ISOLA_TEST_TOKEN;
assert.ok(URL_ && ADMIN, "run through tests/mcp/run.sh");
const MCP = new URL("/mcp", URL_);
const RUN = `${process.pid}${Date.now() % 100000}`;

async function connect(token) {
  const transport = new StreamableHTTPClientTransport(MCP, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "isola-mcp-http-test", version: "0.0.0" });
  await client.connect(transport, { timeout: 20000 });
  return { client, transport };
}

async function api(method, path, body, token = ADMIN) {
  const res = await fetch(new URL(path, URL_), {
    method,
    headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function token(tenant, role) {
  const r = await api("POST", "/v1/tokens", { tenant, role });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body.token;
}

// A raw POST to /mcp: initialize unless a body is given.
function raw(headers, body) {
  return fetch(MCP, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(
      body ?? {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
      },
    ),
  });
}

const text = (res) => res.content[0].text;


describe("isolad /mcp over Streamable HTTP with the official SDK client", () => {
  let a, b, ro, tokA, tokB, tokRo;
  const call = (c, name, args, opts = {}) => c.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts });

  before(async () => {
    for (const t of [`mcpa${RUN}`, `mcpb${RUN}`]) {
      const r = await api("POST", "/v1/tenants", { name: t });
      assert.equal(r.status, 201, JSON.stringify(r.body));
    }
    tokA = await token(`mcpa${RUN}`, "user");
    tokB = await token(`mcpb${RUN}`, "user");
    tokRo = await token(`mcpa${RUN}`, "read-only");
    a = await connect(tokA);
    b = await connect(tokB);
  });
  after(async () => {
    for (const c of [a, b, ro]) await c?.client.close();
  });

  test("initialize gave a session id; tools/list lists the stdio server's tools", async () => {
    assert.match(a.transport.sessionId, /^[0-9a-f]{64}$/);
    assert.equal(a.client.getServerVersion().name, "isola");
    const { tools } = await a.client.listTools();
    assert.ok(tools.length >= 19, `${tools.length} tools`);
    assert.ok(tools.some((t) => t.name === "sandbox_run_command"));
  });

  test("a command runs in the session's default sandbox, as the caller's tenant", async () => {
    const res = await call(a.client, "sandbox_run_command", { command: "echo hello-over-http" });
    assert.equal(res.isError, false, JSON.stringify(res));
    assert.match(text(res), /hello-over-http/);
    const sb = await api("GET", `/v1/sandboxes/${res.structuredContent.sandbox_id}`, undefined, tokA);
    assert.equal(sb.status, 200, "the sandbox is tenant A's");
    const other = await api("GET", `/v1/sandboxes/${res.structuredContent.sandbox_id}`, undefined, tokB);
    assert.equal(other.status, 404, "and not tenant B's");
  });

  test("a tenant token sees only its own sandboxes", async () => {
    const mine = await call(a.client, "sandbox_list", {});
    const theirs = await call(b.client, "sandbox_list", {});
    assert.equal(mine.structuredContent.sandboxes.length, 1, text(mine));
    assert.equal(theirs.structuredContent.sandboxes.length, 0, text(theirs));
    const id = mine.structuredContent.sandboxes[0].id;
    const res = await call(b.client, "sandbox_run_command", { sandbox_id: id, command: "true" });
    assert.equal(res.isError, true);
    assert.match(text(res), /not_found/);
  });

  test("concurrency: a list answers while a 5 s command runs on the same session", async () => {
    let settled = false;
    const run = call(a.client, "sandbox_run_command", { command: "sleep 5; echo slept" }).finally(() => {
      settled = true;
    });
    await until(async () => {
      const ps = await call(a.client, "sandbox_process_list", {});
      return ps.structuredContent.processes.some((p) => p.running && (p.argv || []).join(" ").includes("sleep 5"));
    }, "the sleep running");
    const list = await a.client.listTools();
    assert.ok(list.tools.length >= 19);
    assert.equal(settled, false, "tools/list waited for the running command");
    assert.match(text(await run), /slept/);
  });

  test("progress notifications reach the SSE answer of a request with a progressToken", async () => {
    const seen = [];
    const res = await call(a.client, "sandbox_run_command", { command: "sleep 3; echo p" }, { onprogress: (p) => seen.push(p) });
    assert.match(text(res), /p/);
    assert.ok(seen.length >= 1, "no progress notification");
    assert.match(seen[0].message, /running for \d+ s/);
  });

  test("notifications/cancelled stops the running command", async () => {
    const ac = new AbortController();
    const run = call(a.client, "sandbox_run_command", { command: "sleep 300" }, { signal: ac.signal });
    const sleeping = async () => {
      const ps = await call(a.client, "sandbox_process_list", {});
      return ps.structuredContent.processes.some((p) => p.running && (p.argv || []).join(" ").includes("sleep 300"));
    };
    await until(sleeping, "sleep 300 running");
    ac.abort("test cancels");
    await assert.rejects(run);
    await until(async () => !(await sleeping()), "sleep 300 killed after the cancellation");
  });

  test("bounded output: seq 1 200000 comes back as head, marker and tail", async () => {
    const res = await call(a.client, "sandbox_run_command", { command: "seq 1 200000" });
    const t = text(res);
    assert.ok(t.length < 40000, `${t.length} characters`);
    assert.match(t, /bytes elided: 1288895 bytes in total/);
    assert.match(t, /\n200000\n/);
    assert.ok(res.structuredContent.stdout_file);
  });

  test("a read-only token connects but cannot create", async () => {
    ro = await connect(tokRo);
    const res = await call(ro.client, "sandbox_create", {});
    assert.equal(res.isError, true);
    assert.match(text(res), /forbidden/);
    const list = await call(ro.client, "sandbox_list", {});
    assert.equal(list.structuredContent.sandboxes.length, 1, "read-only sees its tenant's sandbox");
  });

  test("missing or wrong token: 401 with WWW-Authenticate", async () => {
    for (const h of [{}, { Authorization: "Bearer wrong" }, { Authorization: `Basic ${ADMIN}` }]) {
      const r = await raw(h);
      assert.equal(r.status, 401, JSON.stringify(h));
      assert.match(r.headers.get("www-authenticate"), /^Bearer/);
    }
    await assert.rejects(connect("not-a-token"), /unauthorized/);
  });

  test("a foreign Origin is refused with 403; the listener's own is accepted", async () => {
    const auth = { Authorization: `Bearer ${tokA}` };
    for (const o of ["http://evil.example", `http://evil.example:${MCP.port}`, "null", `http://localhost:${Number(MCP.port) + 1}`]) {
      const r = await raw({ ...auth, Origin: o });
      assert.equal(r.status, 403, o);
    }
    const ok = await raw({ ...auth, Origin: `http://${MCP.host}` });
    assert.equal(ok.status, 200);
    const sid = ok.headers.get("mcp-session-id");
    const del = await fetch(MCP, { method: "DELETE", headers: { ...auth, "mcp-session-id": sid } });
    assert.equal(del.status, 204);
  });

  test("session binding: another token's session is 404, none is 400, unknown is 404", async () => {
    const sid = a.transport.sessionId;
    const ping = { jsonrpc: "2.0", id: 7, method: "ping" };
    const other = await raw({ Authorization: `Bearer ${tokB}`, "mcp-session-id": sid }, ping);
    assert.equal(other.status, 404);
    const admin = await raw({ Authorization: `Bearer ${ADMIN}`, "mcp-session-id": sid }, ping);
    assert.equal(admin.status, 404, "not even the admin token uses another token's session");
    const none = await raw({ Authorization: `Bearer ${tokA}` }, ping);
    assert.equal(none.status, 400);
    const unknown = await raw({ Authorization: `Bearer ${tokA}`, "mcp-session-id": "0".repeat(64) }, ping);
    assert.equal(unknown.status, 404);
    const mine = await raw({ Authorization: `Bearer ${tokA}`, "mcp-session-id": sid }, ping);
    assert.equal(mine.status, 200);
    assert.deepEqual((await mine.json()).result, {});
    const del = await fetch(MCP, { method: "DELETE", headers: { Authorization: `Bearer ${tokB}`, "mcp-session-id": sid } });
    assert.equal(del.status, 404, "another token cannot end the session");
  });

  test("GET is 405 (no server-initiated stream); a bad MCP-Protocol-Version is 400", async () => {
    const g = await fetch(MCP, { headers: { Authorization: `Bearer ${tokA}`, accept: "text/event-stream", "mcp-session-id": a.transport.sessionId } });
    assert.equal(g.status, 405);
    const v = await raw({ Authorization: `Bearer ${tokA}`, "mcp-session-id": a.transport.sessionId, "mcp-protocol-version": "1999-01-01" }, { jsonrpc: "2.0", id: 8, method: "ping" });
    assert.equal(v.status, 400);
  });

  test("a batch is answered as an array; notifications alone are 202", async () => {
    const h = { Authorization: `Bearer ${tokA}`, "mcp-session-id": a.transport.sessionId };
    const r = await raw(h, [
      { jsonrpc: "2.0", id: "x", method: "ping" },
      { jsonrpc: "2.0", id: "y", method: "nope" },
    ]);
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.deepEqual(body.map((m) => m.id).sort(), ["x", "y"]);
    assert.equal(body.find((m) => m.id === "y").error.code, -32601);
    const n = await raw(h, { jsonrpc: "2.0", method: "notifications/initialized" });
    assert.equal(n.status, 202);
  });

  test("DELETE ends the session and destroys its default sandbox", async () => {
    const res = await call(a.client, "sandbox_list", {});
    const id = res.structuredContent.sandboxes[0].id;
    const sid = a.transport.sessionId;
    assert.equal((await api("GET", `/v1/sandboxes/${id}`, undefined, tokA)).status, 200);
    await a.transport.terminateSession();
    const gone = await api("GET", `/v1/sandboxes/${id}`, undefined, tokA);
    assert.ok(gone.status === 404 || gone.status === 410, `${gone.status}`);
    const after = await raw({ Authorization: `Bearer ${tokA}`, "mcp-session-id": sid }, { jsonrpc: "2.0", id: 9, method: "ping" });
    assert.equal(after.status, 404);
  });
});
