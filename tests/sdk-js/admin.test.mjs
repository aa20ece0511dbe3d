// SPDX-License-Identifier: Apache-2.0
// @isola/sdk: stats, metrics, whoami, tokens, tenants and quotas, audit, compliance.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const client = new isola.Client({ socketPath: process.env.ISOLA_TEST_SOCKET, timeout: 30000 });

test("stats, whoami, metrics, compliance, audit", async () => {
  const sb = await client.createSandbox({ labels: { suite: "sdk-js" } });
  try {
    const st = await sb.stats();
    assert.equal(st.id, sb.id);
    assert.ok(st.pids >= 1 && st.memory_limit_bytes > 0);
    const me = await client.whoami();
    assert.equal(me.role, "admin");
    assert.match(await client.metrics(), /# TYPE isola_sandboxes gauge/);
    const comp = await client.compliance();
    for (const k of ["tiers", "audit", "tokens"]) assert.ok(k in comp, k);
    const v = await client.auditVerify();
    assert.equal(v.ok, true);
    assert.deepEqual(v.problems, []);
    const recs = [];
    for await (const r of client.auditExport()) recs.push(r);
    assert.ok(recs.some((r) => JSON.stringify(r).includes(sb.id)));
  } finally {
    await sb.delete();
  }
  await assert.rejects(client.sandbox("nosuchsandbox").stats(), isola.NotFoundError);
});

test("tenant, token and quota", async () => {
  const t = await client.createTenant("sdkjs-tenant", { max_sandboxes: 1 });
  try {
    assert.equal(t.quota.max_sandboxes, 1);
    assert.ok((await client.listTenants()).some((x) => x.name === "sdkjs-tenant"));
    assert.equal((await client.updateTenant("sdkjs-tenant", { max_cpu: 4 })).quota.max_cpu, 4);
    assert.equal((await client.getTenant("sdkjs-tenant")).quota.max_sandboxes, 1);
    const tok = await client.createToken({ tenant: "sdkjs-tenant", role: "user", name: "sdkjs" });
    assert.ok(tok.token);
    assert.ok((await client.listTokens("sdkjs-tenant")).some((x) => x.id === tok.id));
    const tc = new isola.Client({ url: process.env.ISOLA_TEST_URL, token: tok.token, timeout: 30000 });
    assert.deepEqual(await tc.whoami().then((m) => [m.tenant, m.role]), ["sdkjs-tenant", "user"]);
    const sb = await tc.createSandbox();
    try {
      await assert.rejects(tc.createSandbox(), (e) => e instanceof isola.QuotaExceededError && e instanceof isola.ForbiddenError && e.status === 403);
      await assert.rejects(client.deleteTenant("sdkjs-tenant"), isola.ConflictError);
    } finally {
      await sb.delete();
    }
    await client.revokeToken(tok.id);
    await assert.rejects(tc.listSandboxes(), isola.UnauthorizedError);
  } finally {
    await client.deleteTenant("sdkjs-tenant");
  }
  await assert.rejects(client.getTenant("sdkjs-tenant"), isola.NotFoundError);
});
