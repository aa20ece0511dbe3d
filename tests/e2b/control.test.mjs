// SPDX-License-Identifier: Apache-2.0
// The E2B control plane beyond create/kill, through the unmodified `e2b` SDK: snapshots and
// create-from-snapshot, fork, list filters/order/pagination, metrics ranges and getHost.
// Needs E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (tests/e2b/run.sh sets them, and starts
// isolad's exposure listener for getHost). Every sandbox a test creates is killed by it.
import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'

import { Sandbox, SandboxNotFoundError } from 'e2b'
import { eventually as eventuallyEvery } from './helpers.mjs'

const api = process.env.E2B_API_URL
const key = process.env.E2B_API_KEY

const eventually = (what, fn, timeoutMs = 30000) => eventuallyEvery(what, fn, timeoutMs, 200)

// The raw control plane, for what the SDK does not send (startedBefore, bad input).
async function ctl(path) {
  const r = await fetch(`${api}${path}`, { headers: { 'X-API-KEY': key } })
  return { status: r.status, body: await r.json() }
}

describe('snapshots and fork', () => {
  test('createSnapshot, create from it, listSnapshots, deleteSnapshot', async () => {
    const sbx = await Sandbox.create()
    let snap, named, child
    try {
      await sbx.files.write('/tmp/snap.txt', 'before')
      snap = await sbx.createSnapshot()
      assert.ok(snap.snapshotId.length > 0)
      assert.deepEqual(snap.names, [snap.snapshotId])
      await sbx.files.write('/tmp/snap.txt', 'after')
      named = await Sandbox.createSnapshot(sbx.sandboxId, { name: `snap-${process.pid}` })
      assert.equal(named.snapshotId, `snap-${process.pid}`)

      // Sandbox.create(snapshotId) starts from the snapshot's files
      child = await Sandbox.create(snap.snapshotId)
      assert.notEqual(child.sandboxId, sbx.sandboxId)
      assert.equal(await child.files.read('/tmp/snap.txt'), 'before')
      assert.equal(await sbx.files.read('/tmp/snap.txt'), 'after') // the source kept running

      // isola's own API sees the same snapshots
      const native = await (await fetch(`${api}/v1/snapshots`, { headers: { Authorization: `Bearer ${key}` } })).json()
      const names = native.snapshots.map((s) => s.name)
      assert.ok(names.includes(snap.snapshotId) && names.includes(named.snapshotId), JSON.stringify(names))

      const mine = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
      assert.deepEqual(mine.map((s) => s.snapshotId).sort(), [snap.snapshotId, named.snapshotId].sort())
      const pager = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
      const seen = []
      while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.snapshotId))
      assert.deepEqual(seen.sort(), [snap.snapshotId, named.snapshotId].sort())
      assert.deepEqual(await Sandbox.listSnapshots({ sandboxId: 'nosuchsandbox000' }).nextItems(), [])

      await child.kill()
      child = undefined
      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
      assert.equal(await Sandbox.deleteSnapshot(named.snapshotId), true)
      await assert.rejects(Sandbox.create(snap.snapshotId)) // gone: an unknown template now
    } finally {
      if (child) await child.kill()
      await sbx.kill()
    }
  })

  test('a snapshot of a killed sandbox is SandboxNotFoundError; a bad name is refused', async () => {
    const sbx = await Sandbox.create()
    try {
      await assert.rejects(sbx.createSnapshot({ name: '../etc' }), (e) => /invalid snapshot name/.test(e.message))
    } finally {
      await sbx.kill()
    }
    await assert.rejects(Sandbox.createSnapshot(sbx.sandboxId), SandboxNotFoundError)
  })

  test('fork: count children with the parent state, independent of it', async () => {
    const sbx = await Sandbox.create()
    const kids = []
    try {
      await sbx.files.write('/tmp/fork.txt', 'parent')
      const forks = await sbx.fork({ count: 2, timeoutMs: 300_000 })
      assert.equal(forks.length, 2)
      for (const f of forks) {
        assert.ok(f instanceof Sandbox, String(f))
        kids.push(f)
      }
      assert.equal(new Set([sbx.sandboxId, ...kids.map((k) => k.sandboxId)]).size, 3)
      for (const k of kids) {
        assert.equal(await k.files.read('/tmp/fork.txt'), 'parent')
        assert.equal((await k.getInfo()).state, 'running')
        const endAt = (await k.getInfo()).endAt.getTime()
        assert.ok(endAt > Date.now() + 200_000, 'the fork got the timeout asked for')
      }
      await kids[0].files.write('/tmp/fork.txt', 'child')
      assert.equal(await sbx.files.read('/tmp/fork.txt'), 'parent')
      assert.equal(await kids[1].files.read('/tmp/fork.txt'), 'parent')
      assert.equal(await sbx.isRunning(), true)
    } finally {
      await Promise.all(kids.map((k) => k.kill()))
      await sbx.kill()
    }
    // E2B: forking a killed sandbox is "not found"
    await assert.rejects(Sandbox.fork(sbx.sandboxId), SandboxNotFoundError)
  })
})

describe('list: order, time and template filters, pagination', () => {
  test('newest first by default, asc on request, startedAfter/startedBefore, template', async () => {
    const tag = `order-${process.pid}-${Date.now()}`
    const made = []
    try {
      for (let i = 0; i < 3; i++) made.push(await Sandbox.create({ metadata: { ordertag: tag } }))
      const ids = made.map((s) => s.sandboxId)
      const q = { metadata: { ordertag: tag } }

      const desc = await Sandbox.list({ query: q }).nextItems()
      assert.deepEqual(desc.map((s) => s.sandboxId), [...ids].reverse())
      const asc = await Sandbox.list({ query: q, order: 'asc' }).nextItems()
      assert.deepEqual(asc.map((s) => s.sandboxId), ids)

      // pages of one, newest first, then oldest first
      for (const [order, want] of [[undefined, [...ids].reverse()], ['asc', ids]]) {
        const pager = Sandbox.list({ query: q, order, limit: 1 })
        const seen = []
        while (pager.hasNext) {
          const page = await pager.nextItems()
          assert.ok(page.length <= 1)
          seen.push(...page.map((s) => s.sandboxId))
        }
        assert.deepEqual(seen, want, `order ${order}`)
      }

      const second = desc.find((s) => s.sandboxId === ids[1]).startedAt
      const after = await Sandbox.list({ query: { ...q, startedAfter: second } }).nextItems()
      assert.deepEqual(after.map((s) => s.sandboxId), [ids[2], ids[1]])
      const future = await Sandbox.list({ query: { ...q, startedAfter: new Date(Date.now() + 3600_000) } }).nextItems()
      assert.deepEqual(future, [])

      const meta = encodeURIComponent(new URLSearchParams({ ordertag: tag }).toString())
      const before = await ctl(`/v2/sandboxes?metadata=${meta}&startedBefore=${encodeURIComponent(second.toISOString())}`)
      assert.equal(before.status, 200)
      assert.deepEqual(before.body.map((s) => s.sandboxID), [ids[1], ids[0]])
      const bad = await ctl('/v2/sandboxes?startedAfter=yesterday')
      assert.equal(bad.status, 400)
      assert.match(bad.body.message, /startedAfter/)
      assert.equal((await ctl('/v2/sandboxes?order=sideways')).status, 400)

      const base = await Sandbox.list({ query: { ...q, template: 'base' } }).nextItems()
      assert.equal(base.length, 3)
      assert.deepEqual(await Sandbox.list({ query: { ...q, template: 'no-such-template' } }).nextItems(), [])

      await made[0].pause()
      const paused = await Sandbox.list({ query: { ...q, state: ['paused'] } }).nextItems()
      assert.deepEqual(paused.map((s) => s.sandboxId), [ids[0]])
      const running = await Sandbox.list({ query: { ...q, state: ['running'] } }).nextItems()
      assert.deepEqual(running.map((s) => s.sandboxId), [ids[2], ids[1]])
    } finally {
      await Promise.all(made.map((s) => s.kill()))
    }
  })
})

describe('metrics history', () => {
  test('getMetrics with start/end returns the kept samples in that range', async () => {
    const sbx = await Sandbox.create()
    try {
      const t0 = new Date(Date.now() - 1000)
      await sbx.commands.run('head -c 3000000 /dev/zero > /tmp/fill')
      // The monitor samples every 5 s: wait for two kept samples (no live one with `end`).
      const kept = await eventually('two kept samples', async () => {
        const m = await sbx.getMetrics({ start: t0, end: new Date() })
        return m.length >= 2 && m
      }, 60000)
      for (const x of kept) {
        assert.ok(x.timestamp >= new Date(Math.floor(t0.getTime() / 1000) * 1000))
        assert.ok(x.cpuUsedPct >= 0 && x.cpuUsedPct <= 100)
        assert.ok(x.memUsed > 0 && x.memTotal >= x.memUsed && x.diskTotal > 0)
      }
      const times = kept.map((x) => x.timestamp.getTime())
      assert.deepEqual(times, [...times].sort((a, b) => a - b), 'oldest first')

      // A range that holds only the first kept sample's second
      const first = kept[0].timestamp
      const sec = new Date(Math.floor(first / 1000) * 1000) // the SDK sends whole seconds
      const just = await sbx.getMetrics({ start: sec, end: sec })
      assert.ok(just.length >= 1)
      assert.ok(just.every((x) => Math.floor(x.timestamp / 1000) === Math.floor(first / 1000)))

      // Outside the sandbox's life: nothing
      assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() + 3600_000) }), [])
      assert.deepEqual(await sbx.getMetrics({ start: new Date(0), end: new Date(t0.getTime() - 3600_000) }), [])

      // Without a range: the history plus a current sample
      const all = await sbx.getMetrics()
      assert.ok(all.length >= kept.length + 1)

      const bad = await ctl(`/sandboxes/${sbx.sandboxId}/metrics?start=soon`)
      assert.equal(bad.status, 400)
    } finally {
      await sbx.kill()
    }
    await assert.rejects(sbx.getMetrics(), SandboxNotFoundError)
  })
})

describe('getHost', () => {
  test('plain fetch of http://<getHost(port)> reaches the port through the exposure listener', async () => {
    const sbx = await Sandbox.create()
    const port = 8765
    const host = sbx.getHost(port)
    const name = host.replace(/:\d+$/, '')
    const otherHost = host.replace(`${port}-`, `${port + 1}-`)
    const line = `127.0.0.1 ${name} ${otherHost.replace(/:\d+$/, '')} # isola e2b control.test.mjs ${process.pid}\n`
    try {
      assert.match(host, new RegExp(`^${port}-${sbx.sandboxId}\\.[a-z0-9.-]+:\\d+$`))
      await sbx.files.write('/tmp/www/hello.txt', 'hello through getHost')
      await sbx.commands.run(`cd /tmp/www && exec python3 -m http.server ${port} --bind 127.0.0.1`, {
        background: true,
      })
      // The name resolves through an /etc/hosts line this test adds and removes (docs/e2b.md
      // describes a wildcard DNS name or such a line for local use).
      appendFileSync('/etc/hosts', line)
      const res = await eventually('the server answers', async () => {
        const r = await fetch(`http://${host}/hello.txt`).catch(() => null)
        if (r && r.status === 502) return false // not listening yet
        return r
      })
      assert.equal(res.status, 200)
      assert.equal(await res.text(), 'hello through getHost')

      // Another port of the same sandbox, nothing listening: the listener says so
      const other = await fetch(`http://${otherHost}/`)
      assert.equal(other.status, 502)
      assert.match(await other.text(), /nothing listens on port 8766/)
    } finally {
      await sbx.kill()
    }
    try {
      const gone = await fetch(`http://${host}/hello.txt`)
      assert.equal(gone.status, 404, 'a killed sandbox is no longer served')
    } finally {
      writeFileSync('/etc/hosts', readFileSync('/etc/hosts', 'utf8').split(/(?<=\n)/).filter((l) => l !== line).join(''))
    }
  })
})
