// SPDX-License-Identifier: Apache-2.0
// @isola/sdk names and tombstones (issue 15) against a real isolad (run.sh): create with a
// name, get by name, wait for the end, list ended sandboxes, prune, and the typed 410/409.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(SOCKET, "run through tests/sdk-js/run.sh (ISOLA_TEST_SOCKET unset)");
const client = new isola.Client({ socketPath: SOCKET, timeout: 30000 });

describe("names and tombstones", () => {
  test("a name reaches the sandbox and is unique", async () => {
    const sb = await client.createSandbox({ name: "js-named", labels: { suite: "sdk-js" } });
    try {
      assert.equal(sb.info.name, "js-named");
      const got = await client.getSandbox("js-named");
      assert.equal(got.id, sb.id);
      assert.equal((await client.sandbox("js-named").exec("echo hi", { timeout: 20 })).stdout, "hi\n");
      await assert.rejects(client.createSandbox({ name: "js-named" }), (e) => {
        assert.ok(e instanceof isola.NameTakenError && e instanceof isola.ConflictError);
        assert.equal(e.status, 409);
        assert.ok(e.message.includes(sb.id), e.message);
        return true;
      });
    } finally {
      await sb.delete();
    }
  });

  test("wait answers the tombstone; ended sandboxes are listed and pruned", async () => {
    const sb = await client.createSandbox({ ttl: 2, name: "js-ttl", labels: { suite: "sdk-js", case: "tomb" } });
    const t = await sb.wait(120);
    assert.equal(t.state, "ended");
    assert.equal(t.end_reason, "expired");
    assert.equal(t.detail, "ttl 2s");
    await assert.rejects(client.getSandbox("js-ttl"), (e) => {
      assert.ok(e instanceof isola.SandboxEndedError && e instanceof isola.NotFoundError);
      assert.equal(e.status, 410);
      assert.equal(e.endReason, "expired");
      assert.ok(e.message.includes("(ttl 2s) and was destroyed"), e.message);
      return true;
    });
    assert.deepEqual((await client.listSandboxes({ case: "tomb" })).map((s) => s.id), []);
    const all = await client.listSandboxes({ case: "tomb" }, { all: true });
    assert.deepEqual(all.map((s) => [s.id, s.info.state]), [[sb.id, "ended"]]);
    assert.ok((await client.prune({ states: ["ended"] })).includes(sb.id));
    await assert.rejects(client.getSandbox(sb.id), (e) => e.status === 404);
  });
});
