// SPDX-License-Identifier: Apache-2.0
// helpers: what every tests/e2b/*.test.mjs needs — the run.sh environment check, sleep and
// eventually (poll until true, failing with what was awaited). Not a test file (run.sh runs *.test.mjs).
import assert from 'node:assert/strict'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) throw new Error(`${v} is not set: run tests/e2b/run.sh`)
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

export async function eventually(what, fn, timeoutMs = 15000, stepMs = 50) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await sleep(stepMs)
  }
}
