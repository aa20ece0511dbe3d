// SPDX-License-Identifier: Apache-2.0
// codeinterp: the unmodified @e2b/code-interpreter package (pinned in package.json) against isolad —
// the code-interpreter-v1 template id, runCode state, callbacks, a matplotlib PNG, errors, contexts,
// JavaScript, charts, and the service started again after it was killed.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import './helpers.mjs'

const RUN = { timeoutMs: 180_000, requestTimeoutMs: 180_000 }

// Width and height from a PNG's IHDR (the first chunk, right after the 8-byte signature).
function pngSize (b64) {
  const buf = Buffer.from(b64, 'base64')
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
  assert.equal(buf.subarray(12, 16).toString('latin1'), 'IHDR')
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)]
}

test('code interpreter through @e2b/code-interpreter', { timeout: 600_000 }, async (t) => {
  const sbx = await Sandbox.create({ timeoutMs: 600_000 })
  t.after(() => sbx.kill())

  await t.test('Sandbox.create() maps code-interpreter-v1 to the default template', async () => {
    // no template of that name here: the sandbox runs the default one (E2B's `base`)
    const info = await sbx.getInfo()
    assert.equal(info.templateId, 'base')
  })

  await t.test('runCode keeps state across calls', async () => {
    const a = await sbx.runCode('x = 40\nx + 1', RUN)
    assert.equal(a.error, undefined)
    assert.equal(a.text, '41')
    const b = await sbx.runCode('x + 2', RUN)
    assert.equal(b.text, '42')
    assert.ok(b.executionCount > a.executionCount)
  })

  await t.test('onStdout, onStderr and onResult are called as output comes', async () => {
    const out = []
    const err = []
    const res = []
    const ex = await sbx.runCode('import sys\nprint("hello")\nprint("oops", file=sys.stderr)\n7 * 6', {
      ...RUN,
      onStdout: (m) => out.push(m.line),
      onStderr: (m) => err.push(m.line),
      onResult: (r) => res.push(r.text)
    })
    assert.equal(out.join(''), 'hello\n')
    assert.equal(err.join(''), 'oops\n')
    assert.deepEqual(res, ['42'])
    assert.deepEqual(ex.logs.stdout, ['hello\n'])
  })

  await t.test('a matplotlib figure arrives as a PNG of the figure size', async () => {
    const ex = await sbx.runCode(
      'import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=100)\n' +
      'plt.plot([1, 2, 3], [4, 1, 9])\nplt.show()', RUN)
    assert.equal(ex.error, undefined, JSON.stringify(ex.error))
    const png = ex.results.find((r) => r.png)
    assert.ok(png, `no PNG result in ${JSON.stringify(ex.results.map((r) => r.formats()))}`)
    assert.deepEqual(pngSize(png.png), [400, 300])
  })

  await t.test('a line chart carries its data (chart extraction)', async () => {
    const ex = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.figure()\nplt.title("growth")\n' +
      'plt.plot([1, 2, 3], [1, 4, 9], label="sq")\nplt.show()', RUN)
    const r = ex.results.find((x) => x.chart)
    assert.ok(r, 'no chart result')
    assert.equal(r.chart.type, 'line')
    assert.equal(r.chart.title, 'growth')
    assert.deepEqual(r.chart.elements[0].points.map((p) => p[1]), [1, 4, 9])
  })

  await t.test('an exception comes back as name, value and traceback', async () => {
    const ex = await sbx.runCode('def f():\n    return 1 / 0\nf()', RUN)
    assert.ok(ex.error)
    assert.equal(ex.error.name, 'ZeroDivisionError')
    assert.match(ex.error.value, /division by zero/)
    const plain = ex.error.traceback.replace(/\x1b\[[0-9;]*m/g, '') // IPython colours it, as E2B's
    assert.match(plain, /ZeroDivisionError/)
    assert.match(plain, /return 1 \/ 0/)
    // the context survives its error
    assert.equal((await sbx.runCode('x', RUN)).text, '40')
  })

  await t.test('createCodeContext: contexts are isolated from each other', async () => {
    const a = await sbx.createCodeContext({ language: 'python' })
    const b = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
    assert.equal(b.cwd, '/tmp')
    await sbx.runCode('secret = 123', { ...RUN, context: a })
    assert.equal((await sbx.runCode('secret', { ...RUN, context: a })).text, '123')
    const inB = await sbx.runCode('secret', { ...RUN, context: b })
    assert.equal(inB.error?.name, 'NameError')
    assert.equal((await sbx.runCode('import os; os.getcwd()', { ...RUN, context: b })).text, '/tmp')
    const ids = (await sbx.listCodeContexts()).map((c) => c.id)
    assert.ok(ids.includes(a.id) && ids.includes(b.id))
    await sbx.restartCodeContext(a)
    assert.equal((await sbx.runCode('secret', { ...RUN, context: a })).error?.name, 'NameError')
    await sbx.removeCodeContext(b)
    assert.ok(!(await sbx.listCodeContexts()).map((c) => c.id).includes(b.id))
  })

  await t.test('a JavaScript context keeps its own state', async () => {
    const js = await sbx.createCodeContext({ language: 'js' })
    await sbx.runCode('let n = 20', { ...RUN, context: js })
    const ex = await sbx.runCode('n * 2 + 2', { ...RUN, context: js })
    assert.equal(ex.text, '42')
    const byLang = await sbx.runCode('console.log("from js")', { ...RUN, language: 'js' })
    assert.deepEqual(byLang.logs.stdout, ['from js\n'])
  })

  await t.test('a killed service is started again on the next call', async () => {
    await sbx.commands.run("pkill -f '/opt/isola-interp/[s]erver.py'", { user: 'root' })
    const ex = await sbx.runCode('1 + 1', RUN)
    assert.equal(ex.text, '2')
  })
})
