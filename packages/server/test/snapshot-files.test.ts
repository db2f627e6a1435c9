/**
 * A finished batch workspace's files are kept as a file under the data dir, not in the
 * database: a 45 MB file grows `berth.db` by a record, the caller's quota holds (the oldest
 * kept files are dropped), and rows from before (the tar base64 in the record) still serve.
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readTar } from '@berth/testkit'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

const MiB = 1024 * 1024
const BIG = 45 * 1000 * 1000
const dataDir = mkdtempSync(join(tmpdir(), 'berth-snapshots-'))
let t: Awaited<ReturnType<typeof taskServer>>

beforeAll(async () => {
  t = await taskServer('podman', {
    // The embedded SQLite store under dataDir (not the suite's usual in-memory storage).
    berth: { storage: undefined, dataDir, workspaceFiles: { quotaBytes: 80 * MiB } },
  })
}, 120_000)
afterAll(async () => {
  await t.s.close()
  await sweep(t.runtime, t.pool)
  rmSync(dataDir, { recursive: true, force: true })
})

/** Bytes of the database, its WAL included. */
const dbBytes = () =>
  ['berth.db', 'berth.db-wal'].reduce(
    (n, f) => n + (existsSync(join(dataDir, f)) ? statSync(join(dataDir, f)).size : 0),
    0,
  )
/** Every kept tar under the data dir, with its size. */
const keptFiles = () => {
  const root = join(dataDir, 'snapshots')
  if (!existsSync(root)) return []
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => ({ path: join(e.parentPath, e.name), size: statSync(join(e.parentPath, e.name)).size }))
}
const download = (id: string, path: string) =>
  t.s.request(`/v1/workspaces/${id}/download?path=${encodeURIComponent(path)}`, { token: t.token })

/** A batch task writing `BIG` random bytes (base64 would make them 60 MB) to big.bin; its workspace. */
async function bigTask(): Promise<string> {
  const command = `head -c ${BIG} /dev/urandom > big.bin && echo done > small.txt`
  const done = await t.run({ prompt: `[[berth:tool Bash ${JSON.stringify({ command })}]]` })
  expect(done.status, JSON.stringify(done.error)).toBe('completed')
  return done.workspace_id!
}

it('a 45 MB file is kept as a file, not in the database; the quota drops the oldest; old base64 rows still serve', async () => {
  const before = dbBytes()
  const first = await bigTask()
  const files = keptFiles()
  expect(files).toHaveLength(1)
  expect(files[0]!.size).toBeGreaterThan(BIG)
  expect(dbBytes() - before).toBeLessThan(5 * MiB)
  const tar = await readTar(new Uint8Array(await (await download(first, 'small.txt')).arrayBuffer()))
  expect(tar.map((e) => [e.name, e.content.toString()])).toEqual([['small.txt', 'done\n']])

  // A second one does not fit beside the first under 80 MiB: the first is dropped.
  const second = await bigTask()
  expect(keptFiles()).toHaveLength(1)
  expect((await download(first, 'small.txt')).status).toBe(400)
  expect((await download(second, 'small.txt')).status).toBe(200)
  expect(t.s.logs.some((l) => l.includes('dropped for the caller quota') && l.includes(first))).toBe(true)

  // A row from before this change: the tar base64 in the record, no file.
  const key = `ws-files:${t.id}:${second}`
  const row = await t.s.berth.store.get<{ file: string }>(key)
  expect(readdirSync(join(dataDir, 'snapshots', t.id))).toEqual([`${second}.tar`])
  const legacy = readFileSync(join(dataDir, 'snapshots', row!.file)).toString('base64')
  await t.s.berth.store.set(key, { tar: legacy, saved_at: t.s.clock.now() })
  rmSync(join(dataDir, 'snapshots', row!.file))
  const old = await readTar(new Uint8Array(await (await download(second, 'small.txt')).arrayBuffer()))
  expect(old.map((e) => [e.name, e.content.toString()])).toEqual([['small.txt', 'done\n']])
}, 300_000)
