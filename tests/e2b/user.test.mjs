// SPDX-License-Identifier: Apache-2.0
// E2B's default user and file details through the unmodified `e2b` SDK: commands and files
// without a user act as `user` in /home/user, owners are names from the sandbox's /etc,
// remove of a missing path succeeds, symlink targets are absolute, file metadata round
// trips, and a process sandbox's boot_id is its own (kept across pause, new after a
// filesystem-only pause). Run by tests/e2b/run.sh.
import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'

import { Sandbox } from 'e2b'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) throw new Error(`${v} is not set: run tests/e2b/run.sh`)
}

const BOOT_ID = '/proc/sys/kernel/random/boot_id'

async function withSandbox(fn) {
  const sbx = await Sandbox.create()
  try {
    await fn(sbx)
  } finally {
    await sbx.kill()
  }
}

describe('default user', () => {
  test('commands run as `user` in its home', () =>
    withSandbox(async (sbx) => {
      assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n')
      assert.equal((await sbx.commands.run('id -u')).stdout, '1000\n')
      assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n')
      assert.equal((await sbx.commands.run('echo $HOME')).stdout, '/home/user\n')
      // An explicit user still wins.
      assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n')
    }))

  test('relative file paths land in /home/user, owned by `user`', () =>
    withSandbox(async (sbx) => {
      const w = await sbx.files.write('a.txt', 'hello')
      assert.equal(w.path, '/home/user/a.txt')
      assert.equal((await sbx.commands.run('cat /home/user/a.txt')).stdout, 'hello')
      assert.equal(await sbx.files.read('a.txt'), 'hello')
      const info = await sbx.files.getInfo('a.txt')
      assert.equal(info.path, '/home/user/a.txt')
      assert.equal(info.owner, 'user')
      assert.equal(info.group, 'user')
      const etc = await sbx.files.getInfo('/etc/passwd')
      assert.equal(etc.owner, 'root')
      assert.equal(etc.group, 'root')
      const names = (await sbx.files.list('.')).map((e) => [e.name, e.owner])
      assert.deepEqual(names.filter(([n]) => n === 'a.txt'), [['a.txt', 'user']])
    }))

  test('owner names come from the sandbox, numbers when it has none', () =>
    withSandbox(async (sbx) => {
      await sbx.commands.run('touch /tmp/n', { user: '4242' })
      const info = await sbx.files.getInfo('/tmp/n')
      assert.equal(info.owner, '4242')
      assert.equal(info.group, 'root')
    }))
})

describe('files', () => {
  test('remove of a missing path succeeds', () =>
    withSandbox(async (sbx) => {
      await sbx.files.remove('/tmp/never-there')
      await sbx.files.remove('no/such/dir')
      assert.equal(await sbx.files.exists('/tmp/never-there'), false)
    }))

  test('getInfo of a symlink reports the absolute target', () =>
    withSandbox(async (sbx) => {
      await sbx.files.write('t.txt', 'x')
      await sbx.commands.run('mkdir -p d && ln -s ../t.txt d/rel && ln -s /etc/hostname d/abs')
      const rel = await sbx.files.getInfo('d/rel')
      assert.equal(rel.type, 'symlink')
      assert.equal(rel.symlinkTarget, '/home/user/t.txt')
      assert.equal((await sbx.files.getInfo('d/abs')).symlinkTarget, '/etc/hostname')
      const listed = await sbx.files.list('d')
      assert.deepEqual(listed.map((e) => [e.name, e.symlinkTarget]).sort(),
        [['abs', '/etc/hostname'], ['rel', '/home/user/t.txt']])
    }))

  test('write metadata is returned by getInfo and list', () =>
    withSandbox(async (sbx) => {
      const meta = { owner: 'alice', 'build-id': 'v1.2 (rc)' }
      await sbx.files.write('/home/user/m.txt', 'data', { metadata: meta })
      assert.deepEqual((await sbx.files.getInfo('m.txt')).metadata, meta)
      const e = (await sbx.files.list('/home/user')).find((x) => x.name === 'm.txt')
      assert.deepEqual(e.metadata, meta)
      // A later write without metadata replaces the file, and the metadata with it.
      await sbx.files.write('/home/user/m.txt', 'new')
      assert.equal((await sbx.files.getInfo('m.txt')).metadata, undefined)
      // Files never given metadata have none.
      assert.equal((await sbx.files.getInfo('/etc/passwd')).metadata, undefined)
      // Header names are case-insensitive: keys come back lower-case.
      await sbx.files.write('k.txt', 'x', { metadata: { 'Build-ID': '7' } })
      assert.deepEqual((await sbx.files.getInfo('k.txt')).metadata, { 'build-id': '7' })
      // Bounded: more than 32 entries are refused and nothing is written.
      const many = Object.fromEntries([...Array(33).keys()].map((i) => [`k${i}`, 'v']))
      await assert.rejects(sbx.files.write('many.txt', 'x', { metadata: many }), /at most 32/)
      assert.equal(await sbx.files.exists('many.txt'), false)
    }))
})

describe('boot_id', () => {
  test('own per boot: kept across pause, new after a filesystem-only pause (files and metadata kept)', () =>
    withSandbox(async (sbx) => {
      const host = readFileSync(BOOT_ID, 'utf8')
      await sbx.files.write('kept.txt', 'x', { metadata: { tag: 'across-hibernate' } })
      const first = (await sbx.commands.run(`cat ${BOOT_ID}`)).stdout
      assert.match(first, /^[0-9a-f-]{36}\n$/)
      assert.notEqual(first, host)
      assert.equal(await sbx.pause(), true)
      const warm = await Sandbox.connect(sbx.sandboxId)
      assert.equal((await warm.commands.run(`cat ${BOOT_ID}`)).stdout, first)
      assert.equal(await warm.pause({ keepMemory: false }), true)
      const cold = await Sandbox.connect(sbx.sandboxId)
      const after = (await cold.commands.run(`cat ${BOOT_ID}`)).stdout
      assert.match(after, /^[0-9a-f-]{36}\n$/)
      assert.notEqual(after, first)
      assert.notEqual(after, host)
      // The files came back from the snapshot with their metadata xattrs.
      assert.deepEqual((await cold.files.getInfo('kept.txt')).metadata, { tag: 'across-hibernate' })
    }))
})
