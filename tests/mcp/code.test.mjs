// SPDX-License-Identifier: Apache-2.0
// sandbox_run_code (issue 16): the sandbox's code interpreter through `isola mcp` with the official
// MCP client — state across calls in the session's default sandbox, a matplotlib figure as MCP
// image content (a PNG of the figure's size), an exception as an error result with its traceback,
// a JavaScript context, structuredContent validated against the tool's output schema.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const CLI = process.env.ISOLA_CLI_BIN;
const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(CLI && SOCKET, "run through tests/mcp/run.sh");

function text(res) {
  assert.ok(Array.isArray(res.content) && res.content[0]?.type === "text", JSON.stringify(res).slice(0, 500));
  return res.content[0].text;
}

describe("sandbox_run_code", () => {
  let client, sid;
  // The first call starts the interpreter and its Python kernel: seconds, more under load.
  const call = (args) => client.callTool({ name: "sandbox_run_code", arguments: args }, undefined, { timeout: 240000 });

  before(async () => {
    const transport = new StdioClientTransport({ command: CLI, args: ["--socket", SOCKET, "mcp"], stderr: "inherit" });
    client = new Client({ name: "isola-mcp-code-test", version: "0.0.0" });
    await client.connect(transport, { timeout: 20000 });
    await client.listTools(); // caches the output schemas: callTool validates structuredContent
    // Python kernels with matplotlib need more than the 256 MiB default.
    const r = await client.callTool({ name: "sandbox_create", arguments: { memory: "1G", ttl: 900 } });
    sid = r.structuredContent.id;
  });
  after(async () => {
    if (sid) await client.callTool({ name: "sandbox_destroy", arguments: { sandbox_id: sid } });
    await client?.close();
  });

  test("state persists across calls; stdout and the last value come back", async () => {
    let res = await call({ sandbox_id: sid, code: "x = 40\nprint('hello from python')\nx + 1" });
    assert.notEqual(res.isError, true, JSON.stringify(res));
    assert.ok(text(res).includes("hello from python") && text(res).includes("41"), text(res));
    res = await call({ sandbox_id: sid, code: "x += 2\nx" });
    assert.equal(res.structuredContent.results[0].text, "42", JSON.stringify(res.structuredContent));
    assert.equal(res.structuredContent.error, null);
    assert.equal(res.structuredContent.sandbox_id, sid);
  });

  test("a matplotlib figure is an image content item: a PNG of the figure's size", async () => {
    const res = await call({
      sandbox_id: sid,
      code: "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    });
    const img = res.content.find((c) => c.type === "image");
    assert.ok(img, JSON.stringify(res.content.map((c) => c.type)));
    assert.equal(img.mimeType, "image/png");
    const png = Buffer.from(img.data, "base64");
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [200, 150]);
    assert.ok(res.structuredContent.results.some((r) => r.formats.includes("png")));
  });

  test("an exception is an error result with name, value and traceback; the context survives", async () => {
    const res = await call({ sandbox_id: sid, code: "def f():\n    return 1 / 0\nf()" });
    assert.equal(res.isError, true);
    assert.equal(res.structuredContent.error.name, "ZeroDivisionError");
    assert.ok(res.structuredContent.error.traceback.includes("f()"), res.structuredContent.error.traceback);
    assert.ok(text(res).includes("ZeroDivisionError"));
    assert.equal((await call({ sandbox_id: sid, code: "x" })).structuredContent.results[0].text, "42");
  });

  test("a JavaScript context of its own; bad input is named", async () => {
    let res = await call({ sandbox_id: sid, language: "javascript", code: "let n = 6;\nn * 7" });
    assert.equal(res.structuredContent.results[0].text, "42", JSON.stringify(res));
    res = await call({ sandbox_id: sid, language: "cobol", code: "1" });
    assert.equal(res.isError, true);
    assert.ok(text(res).includes("cobol"), text(res));
  });
});
