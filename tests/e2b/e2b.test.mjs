// SPDX-License-Identifier: Apache-2.0
// The unmodified `e2b` npm SDK (pinned in package-lock.json) against a real isolad.
// Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at isolad's TCP listener
// (tests/e2b/run.sh sets them). Every sandbox a test creates is killed by the test.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'

import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  NotFoundError,
  RateLimitError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
  TimeoutError,
} from 'e2b'
import { sleep, eventually as eventuallyEvery } from './helpers.mjs'

const eventually = (what, fn, timeoutMs = 10000) => eventuallyEvery(what, fn, timeoutMs, 50)

describe('sandbox lifecycle (control plane)', () => {
  test('create, getInfo, isRunning, kill', async () => {
    const sbx = await Sandbox.create({ metadata: { suite: 'e2b', case: 'lifecycle' } })
    try {
      assert.match(sbx.sandboxId, /^[a-z0-9-]+$/)
      assert.equal(await sbx.isRunning(), true)
      const info = await sbx.getInfo()
      assert.equal(info.sandboxId, sbx.sandboxId)
      assert.equal(info.templateId, 'base')
      assert.equal(info.state, 'running')
      assert.deepEqual(info.metadata, { suite: 'e2b', case: 'lifecycle' })
      assert.ok(info.cpuCount >= 1)
      assert.ok(info.memoryMB > 0)
      assert.ok(info.startedAt instanceof Date && !isNaN(info.startedAt))
      assert.ok(info.endAt > info.startedAt)
    } finally {
      assert.equal(await sbx.kill(), true)
    }
    assert.equal(await sbx.isRunning(), false)
    assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  })

  test('a killed sandbox is reported as such', async () => {
    const sbx = await Sandbox.create()
    await sbx.kill()
    assert.equal(await sbx.isRunning(), false)
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError)
    // The SDK's own words for a sandbox that is gone (E2B's edge answers 502 / unavailable).
    await assert.rejects(sbx.commands.run('echo hi'), SandboxNotFoundError)
    await assert.rejects(sbx.files.read('/etc/hostname'), TimeoutError)
    await assert.rejects(Sandbox.connect(sbx.sandboxId), SandboxNotFoundError)
  })

  test('setTimeout moves endAt', async () => {
    const sbx = await Sandbox.create({ timeoutMs: 60_000 })
    try {
      const before = (await sbx.getInfo()).endAt.getTime()
      await sbx.setTimeout(600_000)
      const after = (await sbx.getInfo()).endAt.getTime()
      assert.ok(after - before > 400_000, `endAt moved by ${after - before} ms`)
      assert.ok(Math.abs(after - (Date.now() + 600_000)) < 5_000)
    } finally {
      await sbx.kill()
    }
  })

  test('pause keeps processes and files; connect resumes; autoPause pauses on timeout', async () => {
    const sbx = await Sandbox.create()
    try {
      await sbx.files.write('/tmp/kept.txt', 'kept across pause')
      const bg = await sbx.commands.run('i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.2; done',
        { background: true })
      await sleep(600)
      assert.equal(await sbx.pause(), true)
      assert.equal(await sbx.pause(), false) // already paused: E2B's 409
      const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
      assert.ok(paused.some((s) => s.sandboxId === sbx.sandboxId), 'listed as paused')
      // A user's pause is not undone by a request; connect resumes it.
      const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 })
      assert.equal(again.sandboxId, sbx.sandboxId)
      assert.equal((await again.commands.run('cat /tmp/kept.txt')).stdout, 'kept across pause')
      const n1 = Number((await again.commands.run('cat /tmp/n')).stdout)
      await sleep(800)
      const n2 = Number((await again.commands.run('cat /tmp/n')).stdout)
      assert.ok(n2 > n1, `the background loop continued after resume (${n1} -> ${n2})`)
      const info = await again.getInfo()
      assert.ok(info.endAt.getTime() - Date.now() > 100_000, 'connect set the new timeout')
      await bg.kill()
    } finally {
      await sbx.kill()
    }
    // keepMemory: false hibernates (files only): E2B sees it as paused, listed by default.
    const cold = await Sandbox.create()
    try {
      await cold.files.write('/home/user/cold.txt', 'on disk')
      assert.equal(await cold.pause({ keepMemory: false }), true)
      assert.equal((await Sandbox.getInfo(cold.sandboxId)).state, 'paused')
      const listed = await Sandbox.list().nextItems()
      assert.ok(listed.some((s) => s.sandboxId === cold.sandboxId && s.state === 'paused'))
      const woke = await Sandbox.connect(cold.sandboxId)
      assert.equal((await woke.commands.run('cat /home/user/cold.txt')).stdout, 'on disk')
    } finally {
      await cold.kill()
    }
    const auto = await Sandbox.create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } })
    try {
      await eventually('autoPause to pause on timeout', async () => {
        const l = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
        return l.some((s) => s.sandboxId === auto.sandboxId)
      }, 30_000)
      const back = await Sandbox.connect(auto.sandboxId, { timeoutMs: 60_000 })
      assert.equal((await back.commands.run('echo back')).stdout, 'back\n')
    } finally {
      await auto.kill()
    }
  })

  test('list with metadata filter and pagination', async () => {
    const tag = `list-${process.pid}-${Date.now()}`
    const a = await Sandbox.create({ metadata: { listtag: tag, n: '1' } })
    const b = await Sandbox.create({ metadata: { listtag: tag, n: '2' } })
    const other = await Sandbox.create({ metadata: { listtag: 'other' } })
    try {
      const all = await Sandbox.list({ query: { metadata: { listtag: tag } } }).nextItems()
      assert.deepEqual(all.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
      for (const s of all) {
        assert.equal(s.state, 'running')
        assert.equal(s.templateId, 'base')
        assert.equal(s.metadata.listtag, tag)
      }
      const pager = Sandbox.list({ query: { metadata: { listtag: tag } }, limit: 1 })
      const seen = []
      while (pager.hasNext) {
        const page = await pager.nextItems()
        assert.ok(page.length <= 1)
        seen.push(...page.map((s) => s.sandboxId))
      }
      assert.deepEqual(seen.sort(), [a.sandboxId, b.sandboxId].sort())
      const one = await Sandbox.list({ query: { metadata: { listtag: tag, n: '2' } } }).nextItems()
      assert.deepEqual(one.map((s) => s.sandboxId), [b.sandboxId])
      const paused = await Sandbox.list({ query: { metadata: { listtag: tag }, state: ['paused'] } }).nextItems()
      assert.deepEqual(paused, [])
    } finally {
      await Promise.all([a.kill(), b.kill(), other.kill()])
    }
  })

  test('getMetrics', async () => {
    const sbx = await Sandbox.create()
    try {
      await sbx.commands.run('head -c 2000000 /dev/zero > /tmp/fill')
      const m = await sbx.getMetrics()
      assert.ok(m.length >= 1)
      const last = m[m.length - 1]
      assert.ok(last.timestamp instanceof Date && !isNaN(last.timestamp))
      assert.ok(last.cpuCount >= 1)
      assert.ok(last.cpuUsedPct >= 0 && last.cpuUsedPct <= 100)
      assert.ok(last.memTotal > 0 && last.memUsed > 0 && last.memUsed <= last.memTotal)
      assert.ok(last.diskTotal > 0 && last.diskUsed >= 0)
    } finally {
      await sbx.kill()
    }
  })

  test('a wrong API key is an AuthenticationError', async () => {
    await assert.rejects(Sandbox.create({ apiKey: 'e2b_0000' }), AuthenticationError)
    await assert.rejects(Sandbox.list({ apiKey: 'e2b_0000' }).nextItems(), AuthenticationError)
  })

  test('an unknown template is reported, nothing is left behind', async () => {
    await assert.rejects(Sandbox.create('no-such-template-xyz'), (e) => e instanceof SandboxError)
  })
})

describe('commands (process.Process)', () => {
  let sbx
  before(async () => {
    sbx = await Sandbox.create()
  })
  after(async () => {
    await sbx?.kill()
  })

  test('foreground run with streaming callbacks', async () => {
    const out = []
    const err = []
    const r = await sbx.commands.run('echo one; echo two >&2; printf three', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'one\nthree')
    assert.equal(r.stderr, 'two\n')
    assert.equal(out.join(''), 'one\nthree')
    assert.equal(err.join(''), 'two\n')
  })

  test('envs, cwd and user', async () => {
    const r = await sbx.commands.run('echo "$FOO"; pwd; id -u', { envs: { FOO: 'bar baz' }, cwd: '/tmp' })
    assert.equal(r.stdout, 'bar baz\n/tmp\n1000\n') // E2B's default user, `user`
    const u = await sbx.commands.run('id -un', { user: 'root' })
    assert.equal(u.stdout.trim(), 'root')
  })

  test('non-zero exit raises CommandExitError', async () => {
    await assert.rejects(sbx.commands.run('echo nope >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e?.name}`)
      assert.equal(e.exitCode, 3)
      assert.equal(e.stderr, 'nope\n')
      return true
    })
  })

  test('output arrives while the command runs', async () => {
    const got = []
    let firstAt = 0
    const t0 = Date.now()
    await sbx.commands.run('echo a; sleep 1; echo b', {
      onStdout: (d) => {
        if (!firstAt) firstAt = Date.now()
        got.push(d)
      },
    })
    assert.equal(got.join(''), 'a\nb\n')
    assert.ok(firstAt - t0 < 900, `first output after ${firstAt - t0} ms`)
  })

  test('background command: stdin, list, kill', async () => {
    const out = []
    const h = await sbx.commands.run('cat', { background: true, stdin: true, onStdout: (d) => out.push(d) })
    assert.ok(h.pid > 0)
    await h.sendStdin('hello\n')
    await sbx.commands.sendStdin(h.pid, 'world\n')
    await eventually('echoed stdin', () => out.join('') === 'hello\nworld\n')
    const listed = await sbx.commands.list()
    const me = listed.find((p) => p.pid === h.pid)
    assert.ok(me, 'background process is listed')
    assert.equal(me.cmd, '/bin/bash')
    assert.deepEqual(me.args.slice(0, 2), ['-l', '-c'])
    assert.equal(await h.kill(), true)
    await assert.rejects(h.wait(), CommandExitError)
    await eventually('process gone from list', async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid))
    assert.equal(await sbx.commands.kill(h.pid), false)
  })

  test('closeStdin ends a reader', async () => {
    const h = await sbx.commands.run('wc -c', { background: true, stdin: true })
    await h.sendStdin('12345')
    await h.closeStdin()
    const r = await h.wait()
    assert.equal(r.stdout.trim(), '5')
  })

  test('connect to a running command', async () => {
    const h = await sbx.commands.run('for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.3; done', { background: true })
    await h.disconnect()
    const out = []
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => out.push(d) })
    assert.equal(c.pid, h.pid)
    const r = await c.wait()
    assert.equal(r.exitCode, 0)
    assert.match(out.join(''), /tick6\n$/)
  })

  test('connect to an unknown pid fails', async () => {
    await assert.rejects(sbx.commands.connect(999999), NotFoundError)
  })

  test('a missing program is an error, not a hang', async () => {
    await assert.rejects(sbx.commands.run('definitely-not-a-command-xyz'), (e) => {
      assert.ok(e instanceof CommandExitError)
      assert.equal(e.exitCode, 127)
      return true
    })
  })

  test('pty: create, input, resize, kill', async () => {
    const chunks = []
    const dec = new TextDecoder()
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => chunks.push(dec.decode(d)) })
    await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
    await eventually('pty output', () => /pty-42/.test(chunks.join('')))
    assert.match(chunks.join(''), /30 100/)
    assert.equal(await pty.kill(), true)
  })
})

describe('files (filesystem.Filesystem and /files)', () => {
  let sbx
  before(async () => {
    sbx = await Sandbox.create()
  })
  after(async () => {
    await sbx?.kill()
  })

  test('write and read text', async () => {
    const info = await sbx.files.write('/tmp/e2b/dir/hello.txt', 'hello, isola\n')
    assert.equal(info.path, '/tmp/e2b/dir/hello.txt')
    assert.equal(info.name, 'hello.txt')
    assert.equal(await sbx.files.read('/tmp/e2b/dir/hello.txt'), 'hello, isola\n')
    const empty = await sbx.files.write('/tmp/e2b/empty.txt', '')
    assert.equal(empty.name, 'empty.txt')
    assert.equal(await sbx.files.read('/tmp/e2b/empty.txt'), '')
  })

  test('write and read bytes', async () => {
    const data = new Uint8Array(300_000)
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 8)) & 0xff
    await sbx.files.write('/tmp/e2b/blob.bin', data)
    const back = await sbx.files.read('/tmp/e2b/blob.bin', { format: 'bytes' })
    assert.equal(back.length, data.length)
    assert.deepEqual(Buffer.from(back), Buffer.from(data))
    const blob = await sbx.files.read('/tmp/e2b/blob.bin', { format: 'blob' })
    assert.equal(blob.size, data.length)
  })

  test('write a stream (octet-stream upload)', async () => {
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode('streamed '))
        c.enqueue(new TextEncoder().encode('bytes'))
        c.close()
      },
    })
    await sbx.files.write('/tmp/e2b/stream.txt', stream)
    assert.equal(await sbx.files.read('/tmp/e2b/stream.txt'), 'streamed bytes')
  })

  test('writeFiles writes several files at once', async () => {
    const res = await sbx.files.writeFiles([
      { path: '/tmp/e2b/multi/a.txt', data: 'A' },
      { path: '/tmp/e2b/multi/b.txt', data: 'B' },
    ])
    assert.deepEqual(res.map((f) => f.path).sort(), ['/tmp/e2b/multi/a.txt', '/tmp/e2b/multi/b.txt'])
    assert.equal(await sbx.files.read('/tmp/e2b/multi/b.txt'), 'B')
  })

  test('list, getInfo, exists', async () => {
    await sbx.files.write('/tmp/e2b/ls/one.txt', '1')
    await sbx.files.makeDir('/tmp/e2b/ls/sub')
    const entries = await sbx.files.list('/tmp/e2b/ls')
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]))
    assert.deepEqual(Object.keys(byName).sort(), ['one.txt', 'sub'])
    assert.equal(byName['one.txt'].type, 'file')
    assert.equal(byName['one.txt'].size, 1)
    assert.equal(byName['one.txt'].path, '/tmp/e2b/ls/one.txt')
    assert.equal(byName.sub.type, 'dir')
    const info = await sbx.files.getInfo('/tmp/e2b/ls/one.txt')
    assert.equal(info.type, 'file')
    assert.equal(info.permissions, '-rw-r--r--')
    assert.ok(info.modifiedTime instanceof Date && Math.abs(info.modifiedTime - Date.now()) < 120_000)
    assert.equal(await sbx.files.exists('/tmp/e2b/ls/one.txt'), true)
    assert.equal(await sbx.files.exists('/tmp/e2b/ls/nope.txt'), false)
    const deep = await sbx.files.list('/tmp/e2b', { depth: 2 })
    assert.ok(deep.some((e) => e.path === '/tmp/e2b/ls/one.txt'))
  })

  test('makeDir, rename, remove', async () => {
    assert.equal(await sbx.files.makeDir('/tmp/e2b/mk/a/b'), true)
    assert.equal(await sbx.files.makeDir('/tmp/e2b/mk/a/b'), false)
    await sbx.files.write('/tmp/e2b/mk/a/b/f.txt', 'x')
    const moved = await sbx.files.rename('/tmp/e2b/mk/a/b/f.txt', '/tmp/e2b/mk/g.txt')
    assert.equal(moved.path, '/tmp/e2b/mk/g.txt')
    assert.equal(await sbx.files.exists('/tmp/e2b/mk/a/b/f.txt'), false)
    assert.equal(await sbx.files.read('/tmp/e2b/mk/g.txt'), 'x')
    await sbx.files.remove('/tmp/e2b/mk')
    assert.equal(await sbx.files.exists('/tmp/e2b/mk'), false)
  })

  test('a missing file raises FileNotFoundError', async () => {
    await assert.rejects(sbx.files.read('/tmp/e2b/does-not-exist'), FileNotFoundError)
    await assert.rejects(sbx.files.getInfo('/tmp/e2b/does-not-exist'), FileNotFoundError)
    await assert.rejects(sbx.files.list('/tmp/e2b/does-not-exist'), FileNotFoundError)
  })

  test('watchDir reports writes and removals', async () => {
    await sbx.files.makeDir('/tmp/e2b/watched')
    const events = []
    const w = await sbx.files.watchDir('/tmp/e2b/watched', (e) => events.push(e))
    try {
      await sbx.files.write('/tmp/e2b/watched/w.txt', 'watch me')
      await eventually('write event', () => events.some((e) => e.name === 'w.txt' && e.type === 'write'))
      assert.ok(events.some((e) => e.name === 'w.txt' && e.type === 'create'))
      await sbx.commands.run('rm /tmp/e2b/watched/w.txt')
      await eventually('remove event', () => events.some((e) => e.name === 'w.txt' && e.type === 'remove'))
    } finally {
      await w.stop()
    }
  })

  test('recursive watchDir sees subdirectories', async () => {
    await sbx.files.makeDir('/tmp/e2b/rw/sub')
    const events = []
    const w = await sbx.files.watchDir('/tmp/e2b/rw', (e) => events.push(e), { recursive: true })
    try {
      await sbx.commands.run('echo hi > /tmp/e2b/rw/sub/deep.txt')
      await eventually('nested event', () => events.some((e) => e.name === 'sub/deep.txt'))
    } finally {
      await w.stop()
    }
  })

  test('watchDir on a missing directory fails', async () => {
    await assert.rejects(sbx.files.watchDir('/tmp/e2b/no-such-dir', () => {}), NotFoundError)
  })
})

// Below the SDK: what it relies on but does not exercise in every call.
describe('envd wire protocol (Connect over HTTP/1.1)', () => {
  let sbx
  const url = process.env.E2B_SANDBOX_URL
  before(async () => {
    sbx = await Sandbox.create()
  })
  after(async () => {
    await sbx?.kill()
  })

  const headers = (extra = {}) => ({
    'E2b-Sandbox-Id': sbx.sandboxId,
    'E2b-Sandbox-Port': '49983',
    'X-Access-Token': sbx.envdAccessToken,
    'Connect-Protocol-Version': '1',
    ...extra,
  })

  function envelope(msg, flags = 0) {
    const body = Buffer.from(JSON.stringify(msg))
    const hdr = Buffer.alloc(5)
    hdr[0] = flags
    hdr.writeUInt32BE(body.length, 1)
    return Buffer.concat([hdr, body])
  }

  // Reads a Connect stream, recording each envelope and when it arrived.
  async function readEnvelopes(res) {
    const out = []
    let buf = Buffer.alloc(0)
    for await (const chunk of res.body) {
      buf = Buffer.concat([buf, Buffer.from(chunk)])
      while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
        const n = buf.readUInt32BE(1)
        out.push({ flags: buf[0], msg: JSON.parse(buf.subarray(5, 5 + n).toString()), at: Date.now() })
        buf = buf.subarray(5 + n)
      }
    }
    assert.equal(buf.length, 0, 'no partial envelope at the end')
    return out
  }

  test('chunked request body, per-envelope flushing, keepalive, end-of-stream', async () => {
    const body = envelope({ process: { cmd: '/bin/sh', args: ['-c', 'echo a; sleep 2.5; echo b'] } })
    // A stream body makes fetch send Transfer-Encoding: chunked.
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(body.subarray(0, 3))
        c.enqueue(body.subarray(3))
        c.close()
      },
    })
    const t0 = Date.now()
    const res = await fetch(`${url}/process.Process/Start`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/connect+json', 'Keepalive-Ping-Interval': '1' }),
      body: stream,
      duplex: 'half',
    })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type'), /^application\/connect\+json/)
    const envs = await readEnvelopes(res)
    assert.ok(envs[0].msg.event.start.pid > 0, 'first message is start')
    const data = envs.filter((e) => e.msg.event?.data)
    const text = data.map((e) => Buffer.from(e.msg.event.data.stdout, 'base64').toString()).join('')
    assert.equal(text, 'a\nb\n')
    assert.ok(data[0].at - t0 < 2000, 'the first output was flushed before the command ended')
    assert.ok(envs.some((e) => e.msg.event && 'keepalive' in e.msg.event), 'keepalive sent while idle')
    const end = envs.find((e) => e.msg.event?.end)
    assert.equal(end.msg.event.end.exitCode, 0)
    assert.equal(end.msg.event.end.status, 'exit status 0')
    const last = envs[envs.length - 1]
    assert.equal(last.flags, 0x02, 'mandatory end-of-stream envelope')
    assert.deepEqual(last.msg, {})
  })

  test('stream errors travel in the end-of-stream envelope', async () => {
    const res = await fetch(`${url}/filesystem.Filesystem/WatchDir`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/connect+json' }),
      body: envelope({ path: '/no/such/dir' }),
    })
    assert.equal(res.status, 200)
    const envs = await readEnvelopes(res)
    const last = envs[envs.length - 1]
    assert.equal(last.flags, 0x02)
    assert.equal(last.msg.error.code, 'not_found')
  })

  test('compressed envelopes and binary codecs are refused', async () => {
    const res = await fetch(`${url}/process.Process/Start`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/connect+json' }),
      body: envelope({ process: { cmd: 'true' } }, 0x01),
    })
    assert.equal(res.status, 400)
    assert.equal((await res.json()).code, 'invalid_argument')
    const bin = await fetch(`${url}/process.Process/List`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/proto' }),
      body: Buffer.alloc(0),
    })
    assert.equal(bin.status, 415)
  })

  test('X-Access-Token is required and checked', async () => {
    for (const token of [undefined, 'wrong', sbx.envdAccessToken + '0']) {
      const h = headers({ 'Content-Type': 'application/json' })
      if (token === undefined) delete h['X-Access-Token']
      else h['X-Access-Token'] = token
      const res = await fetch(`${url}/process.Process/List`, { method: 'POST', headers: h, body: '{}' })
      assert.equal(res.status, 401)
      assert.equal((await res.json()).code, 'unauthenticated')
    }
    const files = await fetch(`${url}/files?path=/etc/hostname`, {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': 'nope' },
    })
    assert.equal(files.status, 401)
    const ok = await fetch(`${url}/health`, { headers: headers() })
    assert.equal(ok.status, 204)
  })

  test('a Basic user selects the identity; a bad one is refused', async () => {
    const res = await fetch(`${url}/filesystem.Filesystem/Stat`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json', Authorization: `Basic ${Buffer.from('root:').toString('base64')}` }),
      body: JSON.stringify({ path: '/tmp' }),
    })
    assert.equal(res.status, 200)
    assert.equal((await res.json()).entry.type, 'FILE_TYPE_DIRECTORY')
    const bad = await fetch(`${url}/filesystem.Filesystem/Stat`, {
      method: 'POST',
      headers: headers({ 'Content-Type': 'application/json', Authorization: `Basic ${Buffer.from('../x:').toString('base64')}` }),
      body: JSON.stringify({ path: '/tmp' }),
    })
    assert.equal(bad.status, 400)
  })

  test('CreateWatcher / GetWatcherEvents / RemoveWatcher', async () => {
    const call = async (method, msg) => {
      const res = await fetch(`${url}/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: headers({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(msg),
      })
      return { status: res.status, body: await res.json() }
    }
    await sbx.files.makeDir('/tmp/polled')
    const created = await call('CreateWatcher', { path: '/tmp/polled', recursive: false })
    assert.equal(created.status, 200)
    const id = created.body.watcherId
    assert.match(id, /^[0-9a-f]{32}$/)
    await sbx.commands.run('touch /tmp/polled/p.txt')
    const events = []
    await eventually('polled event', async () => {
      const r = await call('GetWatcherEvents', { watcherId: id })
      assert.equal(r.status, 200)
      events.push(...r.body.events)
      return events.some((e) => e.name === 'p.txt' && e.type === 'EVENT_TYPE_CREATE')
    })
    assert.equal((await call('RemoveWatcher', { watcherId: id })).status, 200)
    const gone = await call('GetWatcherEvents', { watcherId: id })
    assert.equal(gone.status, 404)
    assert.equal(gone.body.code, 'not_found')
  })

  test('control plane error shapes', async () => {
    const key = process.env.E2B_API_KEY
    const api = process.env.E2B_API_URL
    const get = await fetch(`${api}/sandboxes/nosuchsandbox`, { headers: { 'X-API-KEY': key } })
    assert.equal(get.status, 404)
    assert.deepEqual(Object.keys(await get.json()).sort(), ['code', 'message'])
    const noKey = await fetch(`${api}/v2/sandboxes`)
    assert.equal(noKey.status, 401)
    assert.equal((await noKey.json()).code, 401)
    const badToken = await fetch(`${api}/v2/sandboxes?nextToken=zz`, { headers: { 'X-API-KEY': key } })
    assert.equal(badToken.status, 400)
    const v1 = await fetch(`${api}/sandboxes`, { headers: { 'X-API-KEY': key } })
    assert.equal(v1.status, 200)
    assert.ok((await v1.json()).some((s) => s.sandboxID === sbx.sandboxId))
    const health = await fetch(`${url}/health`, { headers: { ...headers(), 'E2b-Sandbox-Id': 'gone0000' } })
    assert.equal(health.status, 401, 'a token for another sandbox does not fit')
  })
})

describe('tenant tokens as X-API-KEY', () => {
  // The operator (E2B_API_KEY is isolad's API token) makes tenants and tokens through the
  // native API on the same listener; the unmodified SDK then uses the tenant tokens.
  const api = process.env.E2B_API_URL
  const op = { Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }
  const tenants = []
  async function tenant(quota = {}) {
    const name = `e2b-${Math.random().toString(16).slice(2, 10)}`
    const t = await fetch(`${api}/v1/tenants`, { method: 'POST', headers: op, body: JSON.stringify({ name, ...quota }) })
    assert.equal(t.status, 201, await t.text())
    tenants.push(name)
    const token = async (role) => {
      const r = await fetch(`${api}/v1/tokens`, { method: 'POST', headers: op, body: JSON.stringify({ tenant: name, role, name: 'e2b' }) })
      assert.equal(r.status, 201)
      return (await r.json()).token
    }
    return { name, user: await token('user'), reader: await token('read-only') }
  }
  after(async () => {
    for (const name of tenants) await fetch(`${api}/v1/tenants/${name}`, { method: 'DELETE', headers: op })
  })

  test('a tenant token creates, lists and kills only its own sandboxes', async () => {
    const a = await tenant()
    const b = await tenant()
    const sbx = await Sandbox.create({ apiKey: a.user, metadata: { owner: 'a' } })
    try {
      // The sandbox belongs to tenant a, in isola's own API too.
      const native = await fetch(`${api}/v1/sandboxes/${sbx.sandboxId}`, { headers: op })
      assert.equal(native.status, 404, 'the operator token acts for `default`, not for tenant a')
      const mine = await Sandbox.list({ apiKey: a.user }).nextItems()
      assert.deepEqual(mine.map((s) => s.sandboxId), [sbx.sandboxId])
      assert.deepEqual(await Sandbox.list({ apiKey: b.user }).nextItems(), [])
      // Another tenant gets exactly what a missing id gets.
      await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: b.user }), SandboxNotFoundError)
      assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: b.user }), false)
      await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: b.user }), SandboxNotFoundError)
      // envd works with the access token the creating (user) token was given.
      assert.equal((await sbx.commands.run('echo tenant-a')).stdout, 'tenant-a\n')
      // A read-only token reads but cannot create, kill or extend.
      const seen = await Sandbox.getInfo(sbx.sandboxId, { apiKey: a.reader })
      assert.equal(seen.sandboxId, sbx.sandboxId)
      await assert.rejects(Sandbox.create({ apiKey: a.reader }), (e) => /read-only/.test(e.message))
      assert.equal(await sbx.isRunning(), true)
    } finally {
      assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: a.user }), true)
    }
  })

  test("a tenant's quota and creation rate answer 429 with Retry-After", async () => {
    const q = await tenant({ max_sandboxes: 1 })
    const first = await Sandbox.create({ apiKey: q.user })
    try {
      await assert.rejects(Sandbox.create({ apiKey: q.user }), RateLimitError)
    } finally {
      await first.kill()
    }
    const r = await tenant({ create_rate: 0.01, create_burst: 1 })
    const one = await Sandbox.create({ apiKey: r.user })
    try {
      const res = await fetch(`${api}/sandboxes`, { method: 'POST', headers: { 'X-API-KEY': r.user, 'Content-Type': 'application/json' }, body: '{}' })
      assert.equal(res.status, 429)
      const wait = Number(res.headers.get('retry-after'))
      assert.ok(wait > 5 && wait <= 100, `Retry-After ${wait} comes from the tenant's bucket (0.01/s)`)
    } finally {
      await one.kill()
    }
  })

  test('envd access is bound to the token it was issued to, and dies with it', async () => {
    const t = await tenant()
    const mk = await fetch(`${api}/v1/tokens`, { method: 'POST', headers: op, body: JSON.stringify({ tenant: t.name, role: 'user', name: 'keeper' }) })
    assert.equal(mk.status, 201)
    const keeper = (await mk.json()).token
    const envd = process.env.E2B_SANDBOX_URL
    const sbx = await Sandbox.create({ apiKey: t.user })
    try {
      assert.equal((await sbx.commands.run('echo before')).stdout, 'before\n')
      // A read-only key gets no writable handle; the access token getInfo hands it only reads.
      await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: t.reader }), (e) => /read-only/.test(e.message))
      const info = await (await fetch(`${api}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-KEY': t.reader } })).json()
      const h = { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': info.envdAccessToken }
      assert.equal((await fetch(`${envd}/files?path=/etc/hostname`, { headers: h })).status, 200)
      const up = await fetch(`${envd}/files?path=/tmp/ro.txt`, { method: 'POST', headers: { ...h, 'Content-Type': 'application/octet-stream' }, body: 'x' })
      assert.equal(up.status, 403)
      assert.equal(await sbx.files.exists('/tmp/ro.txt'), false)
      // Revoking the token that created the sandbox stops the SDK's handle at once
      // (a token is isola_<12-char id>_<secret>).
      const del = await fetch(`${api}/v1/tokens/${t.user.slice(6, 18)}`, { method: 'DELETE', headers: op })
      assert.equal(del.status, 204)
      await assert.rejects(sbx.commands.run('echo after'), AuthenticationError)
      await assert.rejects(sbx.files.write('/tmp/after.txt', 'x'), AuthenticationError)
      // The sandbox itself is fine: a live token connects and works.
      const again = await Sandbox.connect(sbx.sandboxId, { apiKey: keeper })
      assert.equal((await again.commands.run('echo keeper')).stdout, 'keeper\n')
      assert.equal(await again.files.exists('/tmp/after.txt'), false)
    } finally {
      assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: keeper }), true)
    }
  })

  test('a revoked or unknown token is refused', async () => {
    const t = await tenant()
    const list = await (await fetch(`${api}/v1/tokens?tenant=${t.name}`, { headers: op })).json()
    for (const tok of list.tokens || list) {
      const del = await fetch(`${api}/v1/tokens/${tok.id}`, { method: 'DELETE', headers: op })
      assert.equal(del.status, 204)
    }
    await assert.rejects(Sandbox.create({ apiKey: t.user }), AuthenticationError)
    await assert.rejects(Sandbox.list({ apiKey: `${t.user}x` }).nextItems(), AuthenticationError)
  })
})

describe('network rules (allowInternetAccess, network.allowOut/denyOut, updateNetwork)', () => {
  // Enforcement is judged at sinks by tests/integration/test_network.py; here the E2B
  // fields must land as the isola policy that the proxy and resolver enforce.
  const api = process.env.E2B_API_URL
  const op = { Authorization: `Bearer ${process.env.E2B_API_KEY}` }
  const policy = async (id) => {
    const r = await fetch(`${api}/v1/sandboxes/${id}/network`, { headers: op })
    assert.equal(r.status, 200)
    return (await r.json()).policy
  }

  test('create maps the rules; updateNetwork replaces them live', async () => {
    const closed = await Sandbox.create({ allowInternetAccess: false })
    try {
      assert.equal((await policy(closed.sandboxId)).default, 'deny')
      await closed.updateNetwork({ allowInternetAccess: true })
      assert.equal((await policy(closed.sandboxId)).default, 'allow')
    } finally {
      await closed.kill()
    }
    const listed = await Sandbox.create({ network: { allowOut: ['example.com', '*.example.org', '192.0.2.7'], denyOut: ['0.0.0.0/0'] } })
    try {
      const p = JSON.stringify(await policy(listed.sandboxId))
      assert.match(p, /"default":"deny"/)
      for (const want of ['example.com', '\\*\\.example\\.org', '192\\.0\\.2\\.7/32']) assert.match(p, new RegExp(want))
    } finally {
      await listed.kill()
    }
  })

  test('what isola cannot enforce is refused, and nothing is left behind', async () => {
    const before = (await Sandbox.list().nextItems()).length
    await assert.rejects(Sandbox.create({ network: { egressProxy: { address: 'http://127.0.0.1:3128' } } }), /not supported/)
    await assert.rejects(Sandbox.create({ network: { allowOut: ['not a name!'] } }), SandboxError)
    assert.equal((await Sandbox.list().nextItems()).length, before)
  })
})
