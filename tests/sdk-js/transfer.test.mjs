// SPDX-License-Identifier: Apache-2.0
// @isola/sdk (sdk/js) directory transfers of 20,000 files both ways, in a file of its own: node's
// --test-timeout bounds each file, and this test alone takes ~35 s on an idle 2-core box (JS
// writes every file), over a minute under load.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const SOCKET = process.env.ISOLA_TEST_SOCKET;
assert.ok(SOCKET, "run through tests/sdk-js/run.sh (ISOLA_TEST_* unset)");
const client = new isola.Client({ socketPath: SOCKET, timeout: 30000 });

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
