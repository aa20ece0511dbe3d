// SPDX-License-Identifier: Apache-2.0
// @isola/sdk persistence, lifecycle, pools and network calls against a real isolad (run.sh),
// judged by what the sandboxes hold afterwards.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(SOCKET, "run through tests/sdk-js/run.sh (ISOLA_TEST_SOCKET unset)");
const client = new isola.Client({ socketPath: SOCKET, timeout: 30000 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe("persistence", () => {
  test("pause and resume keep a running process; hibernate keeps files", async () => {
    const sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
    try {
      await sb.processes.start(["/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done"]);
      await sleep(300);
      const p = await sb.pause();
      assert.equal(p.state, "paused");
      assert.equal(p.persistence.pause, "files+memory");
      await assert.rejects(sb.files.readText("/tmp/n"), isola.ConflictError);
      assert.equal((await sb.resume()).state, "running");
      // The counter runs again: polled (a fixed 300 ms wait failed on a loaded CI host).
      const n1 = Number(await sb.files.readText("/tmp/n"));
      let n2 = n1;
      for (const deadline = Date.now() + 15000; n2 <= n1 && Date.now() < deadline; await sleep(100))
        n2 = Number(await sb.files.readText("/tmp/n"));
      assert.ok(n2 > n1, `the counter runs again (${n1} -> ${n2} in 15 s)`);
      await sb.files.write("/home/h.txt", "hibernated");
      assert.equal((await sb.hibernate()).state, "hibernated");
      assert.equal((await sb.resume()).state, "running");
      assert.equal(await sb.files.readText("/home/h.txt"), "hibernated");
    } finally {
      await sb.delete();
    }
  });

  test("named snapshot seeds sandboxes after its source is gone; fork gives fresh identities", async () => {
    const name = `sdkjs-${randomBytes(4).toString("hex")}`;
    const src = await client.createSandbox({ labels: { suite: "sdk-js" } });
    await src.files.write("/home/s.txt", "snap");
    const snap = await src.snapshot(name);
    assert.equal(snap.name, name);
    assert.ok(snap.size > 0);
    await src.delete();
    assert.ok((await client.listSnapshots()).some((s) => s.name === name));
    const a = await client.createSandbox({ snapshot: name, labels: { suite: "sdk-js" } });
    try {
      assert.equal(await a.files.readText("/home/s.txt"), "snap");
      const { children, result } = await a.fork(2);
      try {
        assert.equal(children.length, 2);
        assert.equal(typeof result.paused_us, "number");
        const hosts = new Set();
        for (const c of children) {
          assert.equal(await c.files.readText("/home/s.txt"), "snap");
          hosts.add((await c.exec(["hostname"])).stdout.trim());
        }
        assert.equal(hosts.size, 2);
        await children[0].files.write("/home/s.txt", "child");
        assert.equal(await children[1].files.readText("/home/s.txt"), "snap");
      } finally {
        for (const c of children) await c.delete();
      }
    } finally {
      await a.delete();
    }
    await client.deleteSnapshot(name);
    await assert.rejects(client.getSnapshot(name), isola.NotFoundError);
  });

  test("lifecycle, network policy and pools round-trip", async () => {
    const sb = await client.createSandbox({ labels: { suite: "sdk-js" }, on_timeout: "pause", idle_timeout: 900 });
    try {
      assert.equal(sb.info.on_timeout, "pause");
      const l = await sb.setLifecycle({ on_timeout: "hibernate" });
      assert.equal(l.on_timeout, "hibernate");
      await assert.rejects(sb.setLifecycle({ on_timeout: "explode" }), isola.InvalidError);
      await sb.setNetwork({ default: "deny", allow: [{ domain: "*.example.org", ports: [443] }] });
      assert.match(JSON.stringify(await sb.network()), /\*\.example\.org/);
      await assert.rejects(sb.setNetwork({ allow: [{ cidr: "nope" }] }), isola.InvalidError);
      assert.ok(Array.isArray(await client.listPools()));
    } finally {
      await sb.delete();
    }
  });
});
