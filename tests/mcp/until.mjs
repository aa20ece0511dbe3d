// SPDX-License-Identifier: Apache-2.0
// until.mjs: the polling helper the MCP suites share (not a test file: run.sh runs *.test.mjs).
import assert from "node:assert/strict";

// Polls fn until it returns a truthy value; fails after `tries` attempts (no timing assertion).
export async function until(fn, what, tries = 300) {
  for (let i = 0; i < tries; i++) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`never happened: ${what}`);
}
