// SPDX-License-Identifier: Apache-2.0
// The SDK's template builder against isolad: Template().…copy/runCmd/setEnvs/setWorkdir and
// Template.build(template, {alias}) through isola's Dockerfile builder, then Sandbox.create(alias).
// Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (tests/e2b/run.sh sets them). Every sandbox
// and template a test makes is removed by it.
import { after, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createServer } from 'node:net'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { Sandbox, Template } from 'e2b'
import { create as tarCreate } from 'tar'
import { eventually } from './helpers.mjs'

const api = process.env.E2B_API_URL
const op = { Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }
const made = []
const dirs = []

const alias = (what) => {
  const a = `e2b-${what}-${Math.random().toString(16).slice(2, 8)}`
  made.push(a)
  return a
}

function context() {
  const dir = mkdtempSync(join(tmpdir(), 'isola-e2b-tpl-'))
  dirs.push(dir)
  mkdirSync(join(dir, 'data', 'sub'), { recursive: true })
  writeFileSync(join(dir, 'data', 'hello.txt'), 'hello from the context\n')
  writeFileSync(join(dir, 'data', 'sub', 'deep.txt'), 'deep file\n')
  writeFileSync(join(dir, 'top.txt'), 'top-level file\n')
  return dir
}

after(async () => {
  for (const name of made) await fetch(`${api}/v1/templates/${name}`, { method: 'DELETE', headers: op })
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

describe('Template.build against isolad', () => {
  test('runCmd, copy, setEnvs and setWorkdir build a template Sandbox.create runs', async () => {
    const name = alias('ok')
    const logs = []
    const t = Template({ fileContextPath: context() })
      .fromBaseImage() // e2bdev/base: isola's default template
      .setEnvs({ GREETING: 'hi "there" $HOME \\ok', SECOND: 'two' })
      .copy('top.txt', '/opt/e2bt/top.txt')
      .copy('data/', '/opt/e2bt/data/')
      .runCmd(['echo built-marker > /opt/e2bt/marker', 'echo "run sees $SECOND"'])
      .setWorkdir('/opt/e2bt')
      .runCmd('pwd > /opt/e2bt/pwd-at-build && mkdir u && chmod 777 u')
      .runCmd('id -un > /opt/e2bt/u/who', { user: 'user' }) // that step only
      .runCmd('id -un > /opt/e2bt/after')
      .setStartCmd('sleep 1')
    const info = await Template.build(t, { alias: name, onBuildLogs: (e) => logs.push(e.message) })
    assert.equal(info.templateId, name)
    // The RUN step's output reached the SDK as build log entries.
    assert.ok(logs.includes('run sees two'), logs.join('\n'))
    assert.equal(await Template.exists(name), true)
    const native = await (await fetch(`${api}/v1/templates/${name}`, { headers: op })).json()
    assert.equal(native.source, 'build', JSON.stringify(native))
    assert.deepEqual(native.config.cmd, ['/bin/sh', '-c', 'sleep 1'])

    const sbx = await Sandbox.create(name)
    try {
      const run = async (cmd) => (await sbx.commands.run(cmd, { user: 'root' })).stdout
      assert.equal(await run('cat /opt/e2bt/top.txt'), 'top-level file\n')
      assert.equal(await run('cat /opt/e2bt/data/hello.txt'), 'hello from the context\n')
      assert.equal(await run('cat /opt/e2bt/data/sub/deep.txt'), 'deep file\n')
      assert.equal(await run('cat /opt/e2bt/marker'), 'built-marker\n')
      assert.equal(await run('cat /opt/e2bt/pwd-at-build'), '/opt/e2bt\n')
      assert.equal(await run('cat /opt/e2bt/u/who'), 'user\n')
      assert.equal(await run('cat /opt/e2bt/after'), 'root\n')
      // ENV values are taken literally (quotes, `$`, backslash).
      assert.equal(await run('printf %s "$GREETING"'), 'hi "there" $HOME \\ok')
    } finally {
      await sbx.kill()
    }
  })

  test('cpuCount and memoryMB size the sandboxes made from the template', async () => {
    const name = alias('sized')
    await Template.build(Template().fromTemplate('base').setEnvs({ SIZED: '1' }),
      { alias: name, cpuCount: 2, memoryMB: 300 })
    const native = await (await fetch(`${api}/v1/templates/${name}`, { headers: op })).json()
    assert.deepEqual(native.config.resources, { cpu: 2, memory: 300 * 1024 * 1024 })
    const sbx = await Sandbox.create(name)
    try {
      const info = await sbx.getInfo()
      assert.equal(info.cpuCount, 2)
      assert.equal(info.memoryMB, 300)
    } finally {
      await sbx.kill()
    }
    await assert.rejects(Template.build(Template().fromTemplate('base'),
      { alias: alias('tiny'), memoryMB: 8 }), /memoryMB 8: a sandbox needs at least 16 MiB/)
    await assert.rejects(Template.build(Template().fromTemplate('base'),
      { alias: alias('many'), cpuCount: 5000 }), /cpuCount/)
  })

  test('a failing runCmd rejects Template.build with its output and makes no template', async () => {
    const name = alias('fail')
    const t = Template().fromTemplate('base').runCmd('echo fail-output-7f3a; exit 3')
    await assert.rejects(Template.build(t, { alias: name }), (e) => {
      assert.equal(e.name, 'BuildError', String(e))
      assert.match(e.message, /fail-output-7f3a/)
      assert.match(e.message, /exit/)
      return true
    })
    assert.equal(await Template.exists(name), false)
  })

  test('what cannot be mapped is refused, naming it', async () => {
    // A step type isola's builder has no equivalent for (pushed as a newer SDK would).
    const t = Template().fromTemplate('base').runCmd('true')
    t.instructions.push({ type: 'HEALTHCHECK', args: ['true'], force: false })
    t.stackTraces.push(undefined)
    await assert.rejects(Template.build(t, { alias: alias('hc') }), /step type `HEALTHCHECK` is not supported/)
    // copy() with a mode, a readiness command, a base that is neither template nor image.
    const dir = context()
    await assert.rejects(Template.build(Template({ fileContextPath: dir }).fromTemplate('base')
      .copy('top.txt', '/opt/x', { mode: 0o600 }), { alias: alias('mode') }), /`mode` is not supported/)
    await assert.rejects(Template.build(Template().fromTemplate('base').setStartCmd('sleep 9', 'true'),
      { alias: alias('ready') }), /readyCmd is not supported/)
    await assert.rejects(Template.build(Template().fromImage('not an image!'),
      { alias: alias('img') }), /fromImage `not an image!`: neither an isola template nor an image reference/)
    await assert.rejects(Template.build(Template().fromTemplate('no-such-template-x'),
      { alias: alias('none') }), /fromTemplate `no-such-template-x`: no such template/)
    // Names that are not isola template names, and tags.
    await assert.rejects(Template.build(Template().fromTemplate('base'), { alias: '../etc' }), /invalid template name/)
    await assert.rejects(Template.build(Template().fromTemplate('base'), { alias: 'x:v1' }), /tags are not supported/)
  })

  test('a read-only key is refused and another tenant sees no build', async () => {
    const name = `e2b-${Math.random().toString(16).slice(2, 10)}`
    const r = await fetch(`${api}/v1/tenants`, { method: 'POST', headers: op, body: JSON.stringify({ name }) })
    assert.equal(r.status, 201, await r.text())
    try {
      const token = async (role) => {
        const k = await fetch(`${api}/v1/tokens`, { method: 'POST', headers: op, body: JSON.stringify({ tenant: name, role, name: 'tpl' }) })
        assert.equal(k.status, 201)
        return (await k.json()).token
      }
      const reader = await token('read-only')
      const t = Template().fromTemplate('base').runCmd('true')
      await assert.rejects(Template.build(t, { alias: alias('ro'), apiKey: reader }), (e) => {
        assert.match(e.message, /read-only token may not POST \/v3\/templates/)
        return true
      })
      // A user key builds a template of its tenant's: the operator (tenant `default`) does
      // not see it, nor the tenant's uploads.
      const user = await token('user')
      const own = alias('tenant')
      const ctx = context()
      const mine = Template({ fileContextPath: ctx }).fromTemplate('base').copy('top.txt', '/opt/t.txt')
        .runCmd('cat /opt/t.txt > /opt/ran.txt') // a tenant's RUN sandbox uses the build's hidden template
      await Template.build(mine, { alias: own, apiKey: user })
      assert.equal(await Template.exists(own, { apiKey: user }), true)
      assert.equal(await Template.exists(own), false)
      const sbx = await Sandbox.create(own, { apiKey: user })
      try {
        assert.equal((await sbx.commands.run('cat /opt/t.txt /opt/ran.txt')).stdout, 'top-level file\ntop-level file\n')
      } finally {
        await sbx.kill()
      }
      const [copyHash] = (await mine.instructionsWithHashes()).map((i) => i.filesHash)
      const probe = alias('probe')
      const opKey = { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }
      assert.equal((await fetch(`${api}/v3/templates`, { method: 'POST', headers: opKey, body: JSON.stringify({ name: probe }) })).status, 202)
      const opLink = await (await fetch(`${api}/templates/${probe}/files/${copyHash}`, { headers: opKey })).json()
      assert.equal(opLink.present, false, 'another tenant\'s upload is not present for the operator')
      await fetch(`${api}/v1/templates/${own}`, { method: 'DELETE', headers: { Authorization: `Bearer ${user}` } })

      // A build the operator requested is not the tenant's: its status, upload link and
      // start are 404 for the tenant's user token; a made-up upload token is 401.
      const tid = alias('own')
      const req = await fetch(`${api}/v3/templates`, { method: 'POST', headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: tid }) })
      assert.equal(req.status, 202)
      const { buildID } = await req.json()
      const hash = 'a'.repeat(64)
      const theirs = { 'X-API-KEY': user, 'Content-Type': 'application/json' }
      assert.equal((await fetch(`${api}/templates/${tid}/builds/${buildID}/status`, { headers: theirs })).status, 404)
      assert.equal((await fetch(`${api}/templates/${tid}/files/${hash}`, { headers: theirs })).status, 404)
      assert.equal((await fetch(`${api}/v2/templates/${tid}/builds/${buildID}`, { method: 'POST', headers: theirs, body: JSON.stringify({ fromTemplate: 'base', steps: [] }) })).status, 404)
      const put = await fetch(`${api}/templates/${tid}/files/${hash}?token=${'0'.repeat(32)}`, { method: 'PUT', body: 'x' })
      assert.equal(put.status, 401)
      // Path tricks in the template id name nothing.
      assert.equal((await fetch(`${api}/templates/..%2Fx/files/${hash}`, { headers: op })).status, 404)
    } finally {
      await fetch(`${api}/v1/tenants/${name}`, { method: 'DELETE', headers: op })
    }
  })

  test('an upload that is not a tar is refused and the build cannot use it', async () => {
    const tid = alias('bad')
    const key = { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }
    const req = await fetch(`${api}/v3/templates`, { method: 'POST', headers: key, body: JSON.stringify({ name: tid }) })
    const { buildID } = await req.json()
    const hash = 'b'.repeat(64)
    const link = await (await fetch(`${api}/templates/${tid}/files/${hash}`, { headers: key })).json()
    assert.equal(link.present, false)
    assert.ok(link.url.startsWith(`${api}/templates/${tid}/files/${hash}?token=`), link.url)
    const put = await fetch(link.url, { method: 'PUT', body: 'not a tar at all' })
    assert.equal(put.status, 400)
    assert.match((await put.json()).message, /not a tar archive|corrupt|empty/)
    const start = await fetch(`${api}/v2/templates/${tid}/builds/${buildID}`, {
      method: 'POST',
      headers: key,
      body: JSON.stringify({ fromTemplate: 'base', steps: [{ type: 'COPY', args: ['x', '/x', '', ''], filesHash: hash }] }),
    })
    assert.equal(start.status, 400)
    assert.match((await start.json()).message, /step 1 \(COPY x\): its files .* were not uploaded/)
  })

  test('an upload that does not match its hash fails the build at its COPY', async () => {
    // E2B's filesHash (the SDK's calculateFilesHash) of `COPY f.txt /f.txt` over the real
    // file; the upload carries other bytes under that hash.
    const dir = mkdtempSync(join(tmpdir(), 'isola-e2b-tpl-'))
    dirs.push(dir)
    writeFileSync(join(dir, 'f.txt'), 'the real content\n')
    const st = statSync(join(dir, 'f.txt'))
    const hash = createHash('sha256').update('COPY f.txt /f.txt').update('f.txt')
      .update(st.mode.toString()).update(st.size.toString())
      .update(readFileSync(join(dir, 'f.txt'))).digest('hex')
    writeFileSync(join(dir, 'f.txt'), 'tampered content\n') // same size, other bytes
    await tarCreate({ gzip: true, cwd: dir, file: join(dir, 'up.tgz') }, ['f.txt'])
    const tid = alias('tamper')
    const key = { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }
    const { buildID } = await (await fetch(`${api}/v3/templates`, { method: 'POST', headers: key, body: JSON.stringify({ name: tid }) })).json()
    const link = await (await fetch(`${api}/templates/${tid}/files/${hash}`, { headers: key })).json()
    assert.equal((await fetch(link.url, { method: 'PUT', body: readFileSync(join(dir, 'up.tgz')) })).status, 200)
    const start = await fetch(`${api}/v2/templates/${tid}/builds/${buildID}`, {
      method: 'POST',
      headers: key,
      body: JSON.stringify({ fromTemplate: 'base', steps: [{ type: 'RUN', args: ['true'] }, { type: 'COPY', args: ['f.txt', '/f.txt', '', ''], filesHash: hash }] }),
    })
    assert.equal(start.status, 202, await start.text())
    const status = await eventually('the build to end', async () => {
      const s = await (await fetch(`${api}/templates/${tid}/builds/${buildID}/status`, { headers: key })).json()
      return s.status === 'building' || s.status === 'waiting' ? null : s
    }, 60000, 100)
    assert.equal(status.status, 'error', JSON.stringify(status))
    assert.match(status.reason.message, /COPY f\.txt: the uploaded files do not match their hash/)
    assert.equal(status.reason.step, '2') // stackTraces index: the base is 0
    assert.equal(await Template.exists(tid), false)
  })

  test('fromImage of a registry reference: the operator\'s build pulls it, a tenant\'s is refused', async () => {
    // Debian's docker-registry on a loopback port, an OCI image (tests/integration/imagebuild.py:
    // a static binary, ENV GREETING=from-image) pushed by skopeo.
    const root = mkdtempSync(join(tmpdir(), 'isola-e2b-reg-'))
    dirs.push(root)
    const port = await new Promise((res) => { const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)) }) })
    writeFileSync(join(root, 'config.yml'), ['version: 0.1', 'log:', '  level: warn', 'storage:', '  filesystem:',
      `    rootdirectory: ${join(root, 'data')}`, 'http:', `  addr: 127.0.0.1:${port}`, ''].join('\n'))
    const reg = spawn('/usr/bin/docker-registry', ['serve', join(root, 'config.yml')], { stdio: 'ignore' })
    const tenant = `e2b-${Math.random().toString(16).slice(2, 10)}`
    try {
      await eventually('docker-registry to listen', async () => {
        try { return (await fetch(`http://127.0.0.1:${port}/v2/`)).status === 200 } catch { return false }
      }, 30000, 200)
      const integ = join(dirname(fileURLToPath(import.meta.url)), '..', 'integration')
      execFileSync('/usr/bin/python3', ['-c', [
        'import io, pathlib, sys, tarfile',
        `sys.path.insert(0, ${JSON.stringify(integ)})`,
        'import imagebuild',
        `d = pathlib.Path(${JSON.stringify(root)})`,
        "tarfile.open(fileobj=io.BytesIO(imagebuild.oci_layout(imagebuild.build_hello(d)))).extractall(d / 'layout')",
      ].join('\n')])
      execFileSync('skopeo', ['copy', '--quiet', '--dest-tls-verify=false', `oci:${join(root, 'layout')}`,
        `docker://127.0.0.1:${port}/e2b/hello:1`])
      const ref = `127.0.0.1:${port}/e2b/hello:1`
      const pulled = `127.0.0.1-${port}-e2b-hello-1`

      // A tenant's build never dials a registry from the host.
      const t = await fetch(`${api}/v1/tenants`, { method: 'POST', headers: op, body: JSON.stringify({ name: tenant }) })
      assert.equal(t.status, 201)
      const k = await fetch(`${api}/v1/tokens`, { method: 'POST', headers: op, body: JSON.stringify({ tenant, role: 'user', name: 'tpl' }) })
      const user = (await k.json()).token
      await assert.rejects(Template.build(Template().fromImage(ref).setEnvs({ A: '1' }), { alias: alias('tenant-img'), apiKey: user }),
        /a tenant's build does not pull/)
      assert.equal((await fetch(`${api}/v1/templates/${pulled}`, { headers: op })).status, 404)

      // The operator's pulls it as a template of its own, then builds on it.
      const name = alias('pulled')
      made.push(pulled)
      const logs = []
      await Template.build(Template().fromImage(ref).setEnvs({ FROM_E2B: 'yes' }), { alias: name, onBuildLogs: (e) => logs.push(e.message) })
      assert.ok(logs.some((l) => l.includes(`Pulling ${ref} as template ${pulled}`)), logs.join('\n'))
      const base = await (await fetch(`${api}/v1/templates/${pulled}`, { headers: op })).json()
      assert.match(base.source, /pull/, JSON.stringify(base))
      const built = await (await fetch(`${api}/v1/templates/${name}`, { headers: op })).json()
      assert.equal(built.env.FROM_E2B, 'yes', JSON.stringify(built))
      assert.equal(built.env.GREETING, 'from-image', JSON.stringify(built))
      // A second build from the same reference uses the pulled template (no second pull).
      const again = alias('pulled2')
      const logs2 = []
      await Template.build(Template().fromImage(ref).setWorkdir('/work'), { alias: again, onBuildLogs: (e) => logs2.push(e.message) })
      assert.ok(!logs2.some((l) => l.includes('Pulling')), logs2.join('\n'))
    } finally {
      reg.kill()
      await fetch(`${api}/v1/tenants/${tenant}`, { method: 'DELETE', headers: op })
    }
  })

  test('a tenant keeps at most 8 builds waiting: a ninth request drops its oldest waiting one', async () => {
    const key = { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' }
    const ids = []
    for (let i = 0; i < 9; i++) {
      const tid = alias(`cap${i}`)
      const r = await fetch(`${api}/v3/templates`, { method: 'POST', headers: key, body: JSON.stringify({ name: tid }) })
      assert.equal(r.status, 202)
      ids.push([tid, (await r.json()).buildID])
    }
    const status = async ([tid, bid]) => (await fetch(`${api}/templates/${tid}/builds/${bid}/status`, { headers: key })).status
    assert.equal(await status(ids[0]), 404)
    for (const b of ids.slice(1)) assert.equal(await status(b), 200)
  })
})
