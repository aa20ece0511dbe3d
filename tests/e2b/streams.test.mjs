// SPDX-License-Identifier: Apache-2.0
// envd streams through the unmodified `e2b` SDK: gzip uploads/downloads, signed file URLs,
// PTY reconnect and a sandbox killed while a command streams (issue 13, part C).
// Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (tests/e2b/run.sh sets them).
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import zlib from 'node:zlib'

import { Sandbox, TimeoutError } from 'e2b'

import { eventually } from './helpers.mjs'

// envd's headers for sbx on a raw request (what the SDK sends), plus extra.
const envd = (sbx, extra = {}) => ({ 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken ?? '', ...extra })
const gzipUpload = (sbx) => envd(sbx, { 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' })

// A raw HTTP request (no transparent decompression), for what is on the wire.
function raw(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    if (body) req.write(body)
    req.end()
  })
}

describe('PTY reconnect (process.Process/Connect)', () => {
  let sbx
  before(async () => {
    sbx = await Sandbox.create()
  })
  after(async () => {
    await sbx?.kill()
  })

  test('connect to a PTY delivers its output as pty data', async () => {
    const first = []
    const dec = new TextDecoder()
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => first.push(dec.decode(d)) })
    try {
      await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo before-$((2*3))\n'))
      await eventually('pty output before the reconnect', () => /before-6/.test(first.join('')))
      await pty.disconnect()
      const again = []
      const c = await sbx.pty.connect(pty.pid, { onData: (d) => again.push(dec.decode(d)) })
      assert.equal(c.pid, pty.pid)
      await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo after-$((6*7))\n'))
      await eventually('pty output after the reconnect', () => /after-42/.test(again.join('')))
      // A PTY's output is `data.pty`: the SDK gives no stdout for it.
      assert.equal(c.stdout, '')
    } finally {
      await sbx.pty.kill(pty.pid)
    }
  })
})

describe('a sandbox killed during a run', () => {
  test('commands.run ends with "killed or reached its end of life"', async () => {
    const sbx = await Sandbox.create()
    let started = false
    const run = sbx.commands.run('echo started; sleep 60', {
      onStdout: (d) => {
        if (/started/.test(d)) started = true
      },
    })
    // the rejection is checked below; keep node from reporting it unhandled meanwhile
    run.catch(() => {})
    await eventually('the command to start', () => started)
    // Another client kills it (the static call, as a second process would).
    assert.equal(await Sandbox.kill(sbx.sandboxId), true)
    await assert.rejects(run, (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e?.name}: ${e?.message}`)
      assert.match(e.message, /killed or reached its end of life/)
      return true
    })
  })
})

describe('signed file URLs', () => {
  let sbx
  before(async () => {
    sbx = await Sandbox.create({ secure: true })
    assert.ok(sbx.envdAccessToken, 'the sandbox has an envd access token')
  })
  after(async () => {
    await sbx?.kill()
  })

  test('downloadUrl and uploadUrl work with a plain fetch (only E2B_SANDBOX_URL set)', async () => {
    await sbx.files.write('/tmp/signed/in.txt', 'signed download\n')
    const down = await sbx.downloadUrl('/tmp/signed/in.txt')
    const u = new URL(down)
    assert.match(u.searchParams.get('signature'), /^v1_/)
    assert.equal(u.origin, new URL(process.env.E2B_SANDBOX_URL).origin) // no sandbox id in it
    const res = await fetch(down)
    assert.equal(res.status, 200, await res.clone().text())
    assert.equal(await res.text(), 'signed download\n')

    const up = await sbx.uploadUrl('/tmp/signed/up.txt', { useSignatureExpiration: 120 })
    assert.ok(new URL(up).searchParams.get('signature_expiration'))
    const form = new FormData()
    form.append('file', new Blob(['signed upload\n']), 'up.txt')
    const ures = await fetch(up, { method: 'POST', body: form })
    assert.equal(ures.status, 200, await ures.clone().text())
    assert.equal(await sbx.files.read('/tmp/signed/up.txt'), 'signed upload\n')

    // Each use is audited: who (the access token's issuer), the sandbox, path, operation, user.
    const audit = await fetch(new URL('/v1/audit/export', process.env.E2B_API_URL), {
      headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` },
    })
    assert.equal(audit.status, 200)
    const recs = (await audit.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l))
    const uses = recs.filter((r) => r.action === 'e2b signed url' && r.target === sbx.sandboxId)
    assert.ok(uses.some((r) => r.detail.path === '/tmp/signed/in.txt' && r.detail.operation === 'read' && r.who === 'e2b:api.token'))
    assert.ok(uses.some((r) => r.detail.path === '/tmp/signed/up.txt' && r.detail.operation === 'write' && r.detail.expires > 0))
  })

  test('the signature binds path, operation and user; expired or altered ones get 401', async () => {
    await sbx.files.write('/tmp/signed/other.txt', 'not yours\n')
    const down = new URL(await sbx.downloadUrl('/tmp/signed/in.txt'))
    // another path
    const path = new URL(down)
    path.searchParams.set('path', '/tmp/signed/other.txt')
    assert.equal((await fetch(path)).status, 401)
    // another user
    const user = new URL(down)
    user.searchParams.set('username', 'root')
    assert.equal((await fetch(user)).status, 401)
    // the read signature used to write
    assert.equal((await fetch(down, { method: 'POST', body: new FormData() })).status, 401)
    // an Authorization header does not change the signed user
    const asRoot = await fetch(down, { headers: { Authorization: `Basic ${btoa('root:')}` } })
    assert.equal(asRoot.status, 200)
    // an altered signature
    const sig = down.searchParams.get('signature')
    const altered = new URL(down)
    altered.searchParams.set('signature', sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A'))
    assert.equal((await fetch(altered)).status, 401)
    // a moved expiration
    const exp = new URL(await sbx.downloadUrl('/tmp/signed/in.txt', { useSignatureExpiration: 120 }))
    assert.equal((await fetch(exp)).status, 200)
    const moved = new URL(exp)
    moved.searchParams.set('signature_expiration', String(Number(exp.searchParams.get('signature_expiration')) + 3600))
    assert.equal((await fetch(moved)).status, 401)
    // an expired one (signed for a time already past)
    const expired = new URL(await sbx.downloadUrl('/tmp/signed/in.txt', { useSignatureExpiration: -10 }))
    const r = await fetch(expired)
    assert.equal(r.status, 401)
    assert.match((await r.json()).message, /expired/)
  })

  test("a tenant token's signed URLs: found among its tenant's sandboxes, dead once it is revoked", async () => {
    const api = process.env.E2B_API_URL
    const op = { Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }
    const name = `sig-${Math.random().toString(16).slice(2, 10)}`
    assert.equal((await fetch(`${api}/v1/tenants`, { method: 'POST', headers: op, body: JSON.stringify({ name }) })).status, 201)
    const token = async () => {
      const r = await fetch(`${api}/v1/tokens`, { method: 'POST', headers: op, body: JSON.stringify({ tenant: name, role: 'user', name: 'sig' }) })
      assert.equal(r.status, 201)
      return r.json()
    }
    const tok = await token()
    const keeper = await token() // kills the sandbox once tok is revoked
    let mine
    try {
      mine = await Sandbox.create({ apiKey: tok.token, secure: true })
      await mine.files.write('/tmp/t.txt', 'tenant file\n')
      const url = await mine.downloadUrl('/tmp/t.txt')
      const res = await fetch(url)
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'tenant file\n')
      assert.equal((await fetch(`${api}/v1/tokens/${tok.id}`, { method: 'DELETE', headers: op })).status, 204)
      assert.equal((await fetch(url)).status, 401)
    } finally {
      if (mine) await Sandbox.kill(mine.sandboxId, { apiKey: keeper.token })
      await fetch(`${api}/v1/tenants/${name}`, { method: 'DELETE', headers: op })
    }
  })

  test('a signed URL of a killed sandbox is refused', async () => {
    const other = await Sandbox.create({ secure: true })
    await other.files.write('/tmp/gone.txt', 'x')
    const url = await other.downloadUrl('/tmp/gone.txt')
    assert.equal((await fetch(url)).status, 200)
    await other.kill()
    assert.equal((await fetch(url)).status, 401)
  })
})

describe('gzip uploads and downloads (/files)', () => {
  let sbx
  before(async () => {
    sbx = await Sandbox.create()
  })
  after(async () => {
    await sbx?.kill()
  })

  test('files.write with gzip stores the plain bytes', async () => {
    const text = 'gzip me '.repeat(5000)
    const info = await sbx.files.write('/tmp/gz/a.txt', text, { gzip: true })
    assert.equal(info.path, '/tmp/gz/a.txt')
    assert.equal(await sbx.files.read('/tmp/gz/a.txt'), text)
    const r = await sbx.commands.run('wc -c < /tmp/gz/a.txt')
    assert.equal(r.stdout.trim(), String(text.length))
  })

  test('files.read with gzip, and the response is gzip on the wire', async () => {
    const text = 'read back compressed\n'.repeat(2000)
    await sbx.files.write('/tmp/gz/b.txt', text)
    assert.equal(await sbx.files.read('/tmp/gz/b.txt', { gzip: true }), text)
    const url = new URL('/files', process.env.E2B_SANDBOX_URL)
    url.searchParams.set('path', '/tmp/gz/b.txt')
    const headers = envd(sbx)
    const res = await raw(url, { headers: envd(sbx, { 'Accept-Encoding': 'gzip' }) })
    assert.equal(res.status, 200)
    assert.equal(res.headers['content-encoding'], 'gzip')
    assert.ok(res.body.length < text.length / 4, `compressed to ${res.body.length} bytes`)
    assert.equal(zlib.gunzipSync(res.body).toString(), text)
    const plain = await raw(url, { headers })
    assert.equal(plain.headers['content-encoding'], undefined)
    assert.equal(plain.body.toString(), text)
  })

  test('corrupt gzip is a 400 naming it, and nothing is written', async () => {
    const url = new URL('/files', process.env.E2B_SANDBOX_URL)
    url.searchParams.set('path', '/tmp/gz/corrupt.txt')
    const good = zlib.gzipSync(Buffer.from('x'.repeat(100000)))
    const bad = Buffer.from(good)
    bad.fill(0x55, 20, 60) // the deflate stream is garbage past its header
    const headers = gzipUpload(sbx)
    for (const body of [bad, good.subarray(0, good.length - 12), Buffer.from('not gzip at all')]) {
      const res = await raw(url, { method: 'POST', headers, body })
      assert.equal(res.status, 400, res.body.toString())
      assert.match(JSON.parse(res.body).message, /gzip/)
    }
    assert.equal(await sbx.files.exists('/tmp/gz/corrupt.txt'), false)
  })

  test('a gzip bomb is bounded by the sandbox disk', async () => {
    // 2 GiB of zeros in about 2 MiB of gzip: more than the sandbox's disk (1 GiB by default) holds
    const gz = zlib.createGzip({ level: 9 })
    const chunks = []
    gz.on('data', (c) => chunks.push(c))
    const done = new Promise((r) => gz.on('end', r))
    const zero = Buffer.alloc(1 << 20)
    for (let i = 0; i < 2048; i++) if (!gz.write(zero)) await new Promise((r) => gz.once('drain', r))
    gz.end()
    await done
    const bomb = Buffer.concat(chunks)
    const url = new URL('/files', process.env.E2B_SANDBOX_URL)
    url.searchParams.set('path', '/tmp/gz/bomb.bin')
    const res = await raw(url, {
      method: 'POST',
      headers: gzipUpload(sbx),
      body: bomb,
    })
    assert.equal(res.status, 507, res.body.toString())
    assert.equal(await sbx.files.exists('/tmp/gz/bomb.bin'), false)
    // the sandbox still works
    assert.equal((await sbx.commands.run('echo ok')).stdout, 'ok\n')
  })
})
