import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { indexEntryFor, type Store } from '@berth/core'
import { copyStore, postgresStore, redisStore, sqliteStore } from '@berth/server'
import { startPostgres, startRedis, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT } from './standalone.helpers.js'

let pg: LocalPostgres
let redis: LocalRedis
const dirs: string[] = []
beforeAll(async () => {
  ;[pg, redis] = await Promise.all([startPostgres(), startRedis()])
}, 60_000)
afterAll(async () => {
  await Promise.all([pg?.stop(), redis?.stop()])
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function sqliteFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-migrate-'))
  dirs.push(dir)
  return join(dir, 'berth.db')
}

let schemas = 0
const freshPostgres = () => postgresStore(pg.url, { schema: `m${++schemas}`, max: 4 })

const at = (n: number) => new Date(Date.UTC(2026, 0, 1) + n * 60_000).toISOString()
const STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled']

/** A few hundred records of several kinds and three owners, as the services write them. */
async function fill(store: Store): Promise<void> {
  const put = (key: string, value: Record<string, unknown>) => store.put(key, value, indexEntryFor(key, value)!)
  for (let n = 0; n < 150; n++) {
    const owner = `usr_${n % 3}`
    const id = `task_${String(n).padStart(4, '0')}`
    await put(`tasks:${owner}:${id}`, {
      id,
      owner_id: owner,
      status: STATUSES[n % 5],
      mode: n % 2 ? 'batch' : 'session',
      created_at: at(n),
      prompt: `prompt ${n} with "quotes", \\ and \u0000 and ünïcode`,
    })
  }
  for (let n = 0; n < 60; n++) {
    const owner = `usr_${n % 3}`
    const id = `prof_${n}`
    await put(`profiles:${owner}:${id}`, { id, name: `profile ${n}`, created_at: at(n), options: { turns: n } })
    await put(`memory:${owner}:mem_${n}`, {
      id: `mem_${n}`,
      profile_id: `prof_${n % 4}`,
      type: n % 2 ? 'fact' : 'note',
      created_at: at(1000 - n),
      text: `remember ${n}`,
    })
  }
  for (let n = 0; n < 30; n++) {
    const id = `ws_${n}`
    await put(`workspaces:usr_0:${id}`, {
      id,
      session_id: n % 5 === 0 ? `pb-${n}` : `sess_${n}`,
      status: n % 2 ? 'idle' : 'active',
      created_at: at(n),
    })
  }
  // Transcript events and other values outside any index, and a task-shaped value written
  // with `set` (not listed: an exact copy keeps it unlisted).
  for (let n = 0; n < 120; n++)
    await store.set(`events:usr_0:ws_1:${String(n).padStart(6, '0')}`, { seq: n, type: 'text', text: `event ${n}` })
  await store.set('pool:main:ctr_1', { id: 'ctr_1' })
  await store.set('tasks:usr_0:task_unlisted', {
    id: 'task_unlisted',
    status: 'queued',
    mode: 'batch',
    created_at: at(1),
  })
}

/** Every list a copied record is in (scope and filter), read whole from both stores. */
async function expectSameStores(from: Store, to: Store): Promise<void> {
  const keys = await from.keys('')
  expect(await to.keys('')).toEqual(keys)
  expect(await to.getMany(keys)).toEqual(await from.getMany(keys))
  // Every list (scope, and each filter of it) a source record is in: same items, same order, same total.
  const lists = new Map<string, Set<string | undefined>>()
  for await (const e of from.entries!()) {
    if (!e.index) continue
    const terms = lists.get(e.index.scope) ?? new Set([undefined])
    for (const t of e.index.terms ?? []) terms.add(t)
    lists.set(e.index.scope, terms)
  }
  let checked = 0
  for (const [scope, terms] of lists) {
    for (const term of terms) {
      const q = { term, offset: 0, limit: 1000 }
      expect(await to.list(scope, q)).toEqual(await from.list(scope, q))
      checked++
    }
  }
  expect(checked).toBeGreaterThan(20)
  expect((await to.list('tasks:usr_0', { offset: 0, limit: 1000 })).items).not.toContainEqual(
    expect.objectContaining({ id: 'task_unlisted' }),
  )
}

describe('copying a store into Postgres', () => {
  it('from SQLite: every key, value, list order and total, verified per kind', async () => {
    const from = sqliteStore(sqliteFile())
    const to = await freshPostgres()
    await fill(from)
    const progress: number[] = []
    const report = await copyStore(from, to, { onProgress: (done) => progress.push(done), progressEvery: 100 })
    expect(report.mismatches).toEqual([])
    expect(report.source).toEqual({ events: 120, memory: 60, pool: 1, profiles: 60, tasks: 151, workspaces: 30 })
    expect(report.target).toEqual(report.source)
    expect(report.copied).toBe(422)
    expect(progress).toEqual([100, 200, 300, 400, 422])
    await expectSameStores(from, to)
    await Promise.all([from.close(), to.close()])
  })

  it('from a redis store: the same', async () => {
    const from = redisStore({ client: redis.connect(), prefix: 'src:' })
    const to = await freshPostgres()
    await fill(from)
    const report = await copyStore(from, to)
    expect(report.mismatches).toEqual([])
    expect(report.target).toEqual(report.source)
    expect(report.source.tasks).toBe(151)
    await expectSameStores(from, to)
    await Promise.all([from.close(), to.close()])
  })

  it('and back from Postgres into SQLite; a dry run writes nothing, a non-empty target is refused', async () => {
    const from = await freshPostgres()
    await fill(from)
    const to = sqliteStore(sqliteFile())
    const dry = await copyStore(from, to, { dryRun: true })
    expect(dry).toMatchObject({ copied: 0, target: {}, mismatches: [] })
    expect(dry.source.events).toBe(120)
    expect(await to.keys('')).toEqual([])
    await copyStore(from, to)
    await expectSameStores(from, to)
    await expect(copyStore(from, to)).rejects.toThrow(/already holds 422 keys/)
    // A forced copy into a target holding more: the verification names what disagrees.
    const extra = { id: 'task_extra', status: 'queued', mode: 'batch', created_at: at(9) }
    await to.put('tasks:usr_1:task_extra', extra, indexEntryFor('tasks:usr_1:task_extra', extra)!)
    const forced = await copyStore(from, to, { force: true })
    expect(forced.mismatches).toContain('tasks: 151 keys in the source, 152 in the target')
    expect(forced.mismatches).toContain('list tasks:usr_1: 50 in the source, 51 in the target')
    expect(forced.mismatches).toContain('list tasks:usr_1 (status=queued): 10 in the source, 11 in the target')
    await Promise.all([from.close(), to.close()])
  })
})

describe('the migrate command of the standalone server', () => {
  const run = promisify(execFile)
  const script = join(REPO_ROOT, 'examples/standalone-server/src/migrate.ts')
  const tsx = pathToFileURL(join(REPO_ROOT, 'examples/standalone-server/node_modules/tsx/dist/loader.mjs')).href
  const migrate = (...args: string[]) =>
    run(process.execPath, ['--import', tsx, script, ...args], { cwd: REPO_ROOT, env: { ...process.env } })

  it('copies sqlite: into postgres:// with progress and a table per kind; --dry-run counts only', async () => {
    const file = sqliteFile()
    const source = sqliteStore(file)
    await fill(source)
    await source.close()
    const target = `${pg.url}?schema=cli_${++schemas}`
    const dry = await migrate('--from', `sqlite:${file}`, '--to', target, '--dry-run')
    expect(dry.stdout).toMatch(/tasks\s+151\s+0/)
    expect(dry.stdout).toContain('dry run, nothing written')
    const done = await migrate('--from', `sqlite:${file}`, '--to', target)
    expect(done.stdout).toContain('422/422 keys (100%)')
    expect(done.stdout).toMatch(/events\s+120\s+120/)
    expect(done.stdout).toContain('verified')
    const again = await migrate('--from', `sqlite:${file}`, '--to', target).catch(
      (e: { code: number; stderr: string }) => e,
    )
    expect(again).toMatchObject({ code: 1, stderr: expect.stringMatching(/already holds 422 keys/) })
    const missing = await migrate('--from', 'sqlite:/nonexistent/berth.db', '--to', target).catch(
      (e: { code: number; stderr: string }) => e,
    )
    expect(missing).toMatchObject({ code: 1, stderr: expect.stringMatching(/no SQLite file/) })
  }, 60_000)
})
