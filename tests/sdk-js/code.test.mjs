// SPDX-License-Identifier: Apache-2.0
// code: @isola/sdk's code interpreter (runCode, contexts) against a real isolad started by run.sh.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(SOCKET, "run through tests/sdk-js/run.sh (ISOLA_TEST_SOCKET unset)");
const client = new isola.Client({ socketPath: SOCKET, timeout: 240000 });

describe("code interpreter", () => {
  let sb;
  before(async () => {
    sb = await client.createSandbox({ labels: { suite: "sdk-js-code" } });
  });
  after(async () => {
    await sb?.delete().catch(() => {});
  });

  test("runCode: state, callbacks, rich results, errors", { timeout: 300000 }, async () => {
    const out = [];
    const res = [];
    const ex = await sb.runCode("x = 20\nprint('hi')\nx * 2 + 2", {
      onStdout: (t) => out.push(t),
      onResult: (r) => res.push(r),
    });
    assert.equal(ex.error, undefined);
    assert.equal(ex.text, "42");
    assert.deepEqual(out, ["hi\n"]);
    assert.ok(res[0] instanceof isola.Result && res[0].isMainResult);
    assert.equal((await sb.runCode("x + 1")).text, "21");
    const png = await sb.runCode(
      "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1), dpi=100)\nplt.plot([1, 2])\nplt.show()");
    const img = Buffer.from(png.results.find((r) => r.png).png, "base64");
    assert.equal(img.subarray(1, 4).toString(), "PNG");
    assert.deepEqual([img.readUInt32BE(16), img.readUInt32BE(20)], [200, 100]);
    const err = await sb.runCode("{}['missing']");
    assert.equal(err.error.name, "KeyError");
    assert.match(err.error.traceback, /KeyError/);
  });

  test("contexts: isolated, JavaScript, restart, remove, unknown", { timeout: 300000 }, async () => {
    const a = await sb.createCodeContext();
    const js = await sb.createCodeContext({ language: "js" });
    await sb.runCode("only_a = 1", { context: a });
    assert.equal((await sb.runCode("only_a")).error?.name, "NameError");
    await sb.runCode("const k = 6", { context: js });
    assert.equal((await sb.runCode("k * 7", { context: js })).text, "42");
    assert.ok((await sb.listCodeContexts()).some((c) => c.id === js.id));
    await sb.restartCodeContext(a);
    assert.equal((await sb.runCode("only_a", { context: a })).error?.name, "NameError");
    await sb.removeCodeContext(js);
    await assert.rejects(sb.runCode("1", { context: js }), isola.NotFoundError);
    await assert.rejects(sb.runCode("1", { language: "cobol" }), isola.InvalidError);
  });
});
