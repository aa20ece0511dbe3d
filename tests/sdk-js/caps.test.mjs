// SPDX-License-Identifier: Apache-2.0
// @isola/sdk: cap_add/cap_drop create options and the capabilities a sandbox's root holds.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const client = new isola.Client({ socketPath: process.env.ISOLA_TEST_SOCKET, timeout: 30000 });
const capEff = async (sb, user) =>
  BigInt("0x" + (await sb.exec("grep ^CapEff /proc/self/status", { user })).stdout.split(/\s+/)[1]);

test("default set, cap_drop ALL + cap_add, never-listed refused", async () => {
  const sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
  try {
    assert.equal(await capEff(sb), 0xa00405fbn);
    assert.equal(await capEff(sb, "user"), 0n);
    assert.ok(sb.info.capabilities.includes("CAP_CHOWN"), JSON.stringify(sb.info));
  } finally {
    await sb.delete();
  }
  const few = await client.createSandbox({ cap_drop: ["ALL"], cap_add: ["setuid", "CAP_SETGID"] });
  try {
    assert.deepEqual(few.info.capabilities, ["CAP_SETGID", "CAP_SETUID"]);
    assert.equal(await capEff(few), (1n << 6n) | (1n << 7n));
  } finally {
    await few.delete();
  }
  await assert.rejects(client.createSandbox({ cap_add: ["SYS_ADMIN"] }),
    (e) => e instanceof isola.InvalidError && /CAP_SYS_ADMIN/.test(e.message));
});
