// SPDX-License-Identifier: Apache-2.0
// @isola/sdk: readonly_root at create and a command's narrowing fields (exec, processes.start).
import assert from "node:assert/strict";
import { test } from "node:test";
import * as isola from "../../sdk/js/dist/index.js";

const client = new isola.Client({ socketPath: process.env.ISOLA_TEST_SOCKET, timeout: 30000 });
const PROBE = "id -G; umask; ulimit -Sn; ulimit -Hn; cat /proc/self/oom_score_adj";
const narrow = {
  additional_gids: [10, 2000],
  umask: "027",
  rlimits: [{ type: "RLIMIT_NOFILE", soft: 64, hard: 128 }],
  oom_score_adj: 500,
};

test("readonly_root, narrowed exec and process, widening refused", async () => {
  const sb = await client.createSandbox({ readonly_root: true, labels: { suite: "sdk-js" } });
  try {
    assert.equal(sb.info.readonly_root, true);
    const w = await sb.exec("touch /x 2>&1; echo s > /dev/shm/s && cat /dev/shm/s");
    assert.match(w.stdout, /Read-only file system\ns\n$/);
    assert.equal((await sb.exec(PROBE, { narrow })).stdout, "0 10 2000\n0027\n64\n128\n500\n");
    const p = await sb.processes.start(["sh", "-c", PROBE], { narrow });
    assert.equal((await sb.processes.wait(p.pid)).exit_code, 0);
    assert.equal((await sb.processes.output(p.pid)).stdout.toString(), "0 10 2000\n0027\n64\n128\n500\n");
    await assert.rejects(sb.exec("true", { narrow: { oom_score_adj: -100 } }),
      (e) => e instanceof isola.ForbiddenError && /below the sandbox's 0/.test(e.message));
    await assert.rejects(sb.exec("true", { narrow: { rlimits: [{ type: "nofile", soft: 1, hard: 99999 }] } }),
      (e) => e instanceof isola.ForbiddenError && /RLIMIT_NOFILE hard limit 99999 is above/.test(e.message));
  } finally {
    await sb.delete();
  }
});
