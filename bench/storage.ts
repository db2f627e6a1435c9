/**
 * Storage benchmark: what a caller's calls cost as their records (and other callers')
 * grow, on the embedded default (SQLite), on memory and, for comparison, on the fs layout
 * of earlier versions (unstorage's fs driver, small sizes only).
 *
 * Per driver and size (100, 1k, 10k, 100k tasks of one caller; again with 100k tasks of
 * 20 other callers written first): get by id, list page 1, the middle and the last page
 * (`limit=20`), filtered task lists (`status=failed`, `mode=batch&status=failed`), each
 * through Berth's request pipeline (`berth.fetch`: routing, bearer auth, validation, the
 * service, the store, JSON) without sockets; the create rate of memory rows through the
 * service on top of the filled store; and bytes on disk per record.
 *
 * Knobs (environment): BENCH_STORAGE_SIZES (`100,1000,10000,100000`),
 * BENCH_STORAGE_OTHERS (100000; 0 skips the runs beside other callers),
 * BENCH_STORAGE_DRIVERS (`sqlite,memory,fs`), BENCH_STORAGE_ITERATIONS (40).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { indexEntryFor, newId, silentLogger, type Store, type TaskRecord } from '@berth/core'
import { createBerth, memoryStore, type Berth, type BerthOptions, type SqliteStore } from '@berth/server'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize } from './lib/stats.js'
import { int, ms, table } from './lib/table.js'

// The root does not depend on unstorage: resolve it the way @berth/server does.
const fromServer = createRequire(new URL('../packages/server/package.json', import.meta.url))
type Storage = NonNullable<BerthOptions['storage']>
const { createStorage } = (await import(pathToFileURL(fromServer.resolve('unstorage')).href)) as {
  createStorage(opts?: { driver: unknown }): Storage
}
const fsDriver = (
  (await import(pathToFileURL(fromServer.resolve('unstorage/drivers/fs')).href)) as {
    default: (opts: { base: string }) => unknown
  }
).default

const env = process.env
const SIZES = (env.BENCH_STORAGE_SIZES ?? '100,1000,10000,100000').split(',').map(Number)
const OTHERS = Number(env.BENCH_STORAGE_OTHERS ?? 100_000)
const DRIVERS = (env.BENCH_STORAGE_DRIVERS ?? 'sqlite,memory,fs').split(',')
const ITER = Number(env.BENCH_STORAGE_ITERATIONS ?? 40)
/** The fs layout writes a file per record: too slow to fill beyond this. */
const FS_MAX = 10_000
const CREATES = 1_000
const ADMIN = 'bench-admin-token-0123456789'

/** The issue's targets. */
export const TARGETS = {
  page1Ms: 20,
  anyPageMs: 50,
  getMs: 5,
  filteredMs: 30,
  growth: 2,
  others: 0.2,
  createsPerSec: 2000,
  bytesPerRecord: 1024,
}

interface Scenario {
  driver: string
  size: number
  others: number
  get: number
  page1: number
  middle: number
  last: number
  filtered: number
  filtered2: number
  createsPerSec: number
  bytesPerRecord: number | null
  fillPerSec: number
  /** Each call's p50 over the same call's on the reference Berth (100 records), measured in alternation. */
  vsRef: Record<'get' | 'page1' | 'middle' | 'last' | 'filtered' | 'filtered2', number>
}

function diskBytes(dir: string): number {
  let n = 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) n += diskBytes(p)
    else if (e.isFile()) n += statSync(p).blocks * 512
  }
  return n
}

const STATUSES = [
  'completed',
  'completed',
  'completed',
  'completed',
  'completed',
  'completed',
  'failed',
  'failed',
  'cancelled',
  'completed',
] as const

function task(owner: string, profile: string, i: number, at: number): TaskRecord {
  const now = new Date(at).toISOString()
  return {
    id: newId('task'),
    owner_id: owner,
    mode: i % 3 ? 'batch' : 'session',
    profile_id: profile,
    prompt: `Summarise the changes in release ${i} and list the breaking ones.`,
    priority: 'normal',
    workspace_id: newId('workspace'),
    session_id: newId('session'),
    allowed_tools: null,
    max_turns: null,
    max_budget_usd: null,
    status: STATUSES[i % STATUSES.length]!,
    started_at: now,
    finished_at: now,
    result: {
      text: 'Done.',
      cost_usd: 0.01,
      turns: 3,
      usage: { input_tokens: 1200, output_tokens: 300 },
    } as unknown as TaskRecord['result'],
    error: null,
    created_at: now,
    updated_at: now,
  }
}

/** Write `n` tasks of `owner` (SQLite: batched transactions, as the migration writes). */
async function fill(store: Store, owner: string, profile: string, n: number, start: number): Promise<number> {
  const t0 = performance.now()
  const bulk = (store as Partial<SqliteStore>).importSync
  let batch: { key: string; value: unknown; entry: ReturnType<typeof indexEntryFor> }[] = []
  for (let i = 0; i < n; i++) {
    const r = task(owner, profile, i, start + i)
    const key = `tasks:${owner}:${r.id}`
    if (bulk) {
      batch.push({ key, value: r, entry: indexEntryFor(key, r) })
      if (batch.length === 2000) {
        bulk(batch)
        batch = []
      }
    } else await store.put(key, r, indexEntryFor(key, r)!)
  }
  if (bulk && batch.length) bulk(batch)
  return n / ((performance.now() - t0) / 1000)
}

const KINDS = ['get', 'page1', 'middle', 'last', 'filtered', 'filtered2'] as const
type Kind = (typeof KINDS)[number]

/** A filled Berth and the paths of each measured call on it. */
interface Subject {
  berth: Berth
  token: string
  paths: Record<Kind, string>
  dir: string
  fillPerSec: number
  userId: string
}

async function call(s: Subject, path: string): Promise<number> {
  const t0 = performance.now()
  const res = await s.berth.fetch(
    new Request(`http://bench${path}`, { headers: { authorization: `Bearer ${s.token}` } }),
  )
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  await res.arrayBuffer()
  return performance.now() - t0
}

/**
 * p50 of each call on `s`, and of the same call on the reference Berth (100 records of one
 * caller) in alternation, so both see the same machine load: the ratio is robust on a
 * shared machine even when the absolute numbers are not.
 */
async function measure(s: Subject, ref: Subject): Promise<Record<Kind, { p50: number; ref: number }>> {
  const out = {} as Record<Kind, { p50: number; ref: number }>
  for (const kind of KINDS) {
    const mine: number[] = []
    const theirs: number[] = []
    for (let i = 0; i < ITER + 10; i++) {
      const a = await call(s, s.paths[kind])
      const b = await call(ref, ref.paths[kind])
      if (i >= 10) {
        mine.push(a)
        theirs.push(b)
      }
    }
    out[kind] = { p50: summarize(mine).p50, ref: summarize(theirs).p50 }
  }
  return out
}

async function setup(driver: string, size: number, others: number): Promise<Subject> {
  const dir = mkdtempSync(join(tmpdir(), `berth-bench-storage-${driver}-`))
  const mem = driver === 'memory' ? memoryStore() : undefined
  const berth = createBerth({
    dataDir: dir,
    runtime: false,
    adminToken: ADMIN,
    logger: silentLogger,
    rateLimit: { rpm: 1e9, burst: 1e9 },
    ...(mem && { store: mem }),
    ...(driver === 'fs' && {
      storage: createStorage({ driver: fsDriver({ base: join(dir, 'store') }) }),
      cacheReads: true,
    }),
  })
  const store = berth.store
  const users = berth.services.users
  const start = Date.parse('2026-01-01T00:00:00Z')
  for (let o = 0; o < (others ? 20 : 0); o++) {
    const { user } = await users.create({ name: `other ${o}` })
    await fill(store, user.id, 'prof_other', Math.floor(others / 20), start)
  }
  const { user, key } = await users.create({ name: 'caller' })
  const fillPerSec = await fill(store, user.id, newId('profile'), size, start + 1_000_000)
  const pages = Math.ceil(size / 20)
  const sample = (await store.list<TaskRecord>(`tasks:${user.id}`, { offset: Math.floor(size / 3), limit: 1 }))
    .items[0]!
  const paths: Record<Kind, string> = {
    get: `/v1/tasks/${sample.id}`,
    page1: '/v1/tasks?limit=20',
    middle: `/v1/tasks?limit=20&page=${Math.max(1, Math.ceil(pages / 2))}`,
    last: `/v1/tasks?limit=20&page=${pages}`,
    filtered: '/v1/tasks?status=failed&limit=20',
    filtered2: '/v1/tasks?mode=batch&status=failed&limit=20&page=2',
  }
  return { berth, token: key.token, paths, dir, fillPerSec, userId: user.id }
}

async function teardown(s: Subject): Promise<void> {
  await s.berth.close().catch(() => {})
  rmSync(s.dir, { recursive: true, force: true })
}

async function scenario(driver: string, size: number, others: number, ref: Subject): Promise<Scenario> {
  const s = await setup(driver, size, others)
  try {
    const m = await measure(s, ref)
    // Creates through the service (validation, id, record, index) on top of the filled store.
    const t0 = performance.now()
    for (let i = 0; i < CREATES; i++)
      await s.berth.services.memory.create(s.userId, {
        type: 'fact',
        name: `Fact ${i}`,
        body: `The build of release ${i} takes about ${i % 60} minutes.`,
      })
    const createsPerSec = CREATES / ((performance.now() - t0) / 1000)
    await s.berth.close()
    const bytesPerRecord = driver === 'memory' ? null : diskBytes(s.dir) / (size + others + CREATES)
    const vsRef = Object.fromEntries(KINDS.map((k) => [k, m[k].p50 / m[k].ref])) as Record<Kind, number>
    return {
      driver,
      size,
      others,
      ...(Object.fromEntries(KINDS.map((k) => [k, m[k].p50])) as Record<Kind, number>),
      vsRef,
      createsPerSec,
      bytesPerRecord,
      fillPerSec: s.fillPerSec,
    }
  } finally {
    await teardown(s)
  }
}

/** Bytes on disk per small record (a memory row) alone, created through the service. */
async function smallRecords(driver: string, n: number): Promise<{ bytesPerRecord: number; createsPerSec: number }> {
  const dir = mkdtempSync(join(tmpdir(), `berth-bench-small-${driver}-`))
  const berth = createBerth({
    dataDir: dir,
    runtime: false,
    logger: silentLogger,
    ...(driver === 'fs' && {
      storage: createStorage({ driver: fsDriver({ base: join(dir, 'store') }) }),
      cacheReads: true,
    }),
  })
  try {
    const { user } = await berth.services.users.create({ name: 'caller' })
    const before = diskBytes(dir)
    const t0 = performance.now()
    for (let i = 0; i < n; i++)
      await berth.services.memory.create(user.id, {
        type: 'fact',
        name: `Fact ${i}`,
        body: `The build of release ${i} takes about ${i % 60} minutes.`,
      })
    const createsPerSec = n / ((performance.now() - t0) / 1000)
    await berth.close()
    return { bytesPerRecord: (diskBytes(dir) - before) / n, createsPerSec }
  } finally {
    await berth.close().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
}

const mark = (ok: boolean) => (ok ? 'ok' : 'MISS')

export async function main(): Promise<void> {
  console.log('\nStorage: one caller’s calls as records grow (p50 ms through berth.fetch; pages of 20)')
  const results: Scenario[] = []
  for (const driver of DRIVERS) {
    const ref = await setup(driver, 100, 0)
    try {
      for (const others of OTHERS ? [0, OTHERS] : [0]) {
        for (const size of SIZES) {
          if (driver === 'fs' && size + others > FS_MAX) continue
          const t0 = Date.now()
          const r = await scenario(driver, size, others, ref)
          results.push(r)
          console.log(
            `  ${driver} ${int(size)} records${others ? ` + ${int(others)} of others` : ''}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
          )
        }
      }
    } finally {
      await teardown(ref)
    }
  }
  const small: Record<string, { bytesPerRecord: number; createsPerSec: number }> = {}
  for (const driver of DRIVERS.filter((d) => d !== 'memory'))
    small[driver] = await smallRecords(driver, driver === 'fs' ? 2_000 : 10_000)

  const base = (r: Scenario) =>
    results.find((x) => x.driver === r.driver && x.others === 0 && x.size === Math.min(...SIZES))
  const alone = (r: Scenario) => results.find((x) => x.driver === r.driver && x.others === 0 && x.size === r.size)
  console.log(
    `\n${table(
      [
        'driver',
        'records',
        'others',
        'get',
        'page 1',
        'middle',
        'last',
        'status=',
        'mode&status p2',
        'creates/s',
        'B/record',
        'fill/s',
      ],
      results.map((r) => [
        r.driver,
        int(r.size),
        int(r.others),
        ms(r.get),
        ms(r.page1),
        ms(r.middle),
        ms(r.last),
        ms(r.filtered),
        ms(r.filtered2),
        int(r.createsPerSec),
        r.bytesPerRecord === null ? 'n/a' : int(r.bytesPerRecord),
        int(r.fillPerSec),
      ]),
    )}`,
  )
  // Targets: judged on the embedded default and memory (the fs layout is the old baseline).
  const verdicts: { driver: string; check: string; value: string; target: string; ok: boolean }[] = []
  for (const r of results.filter((x) => x.driver !== 'fs')) {
    const b = base(r)!
    const tag = `${int(r.size)}${r.others ? ` + ${int(r.others)} others` : ''}`
    if (r.size === Math.max(...SIZES)) {
      verdicts.push({
        driver: r.driver,
        check: `page 1 @ ${tag}`,
        value: ms(r.page1),
        target: `< ${TARGETS.page1Ms} ms`,
        ok: r.page1 < TARGETS.page1Ms,
      })
      const worst = Math.max(r.page1, r.middle, r.last, r.filtered2)
      verdicts.push({
        driver: r.driver,
        check: `any page @ ${tag}`,
        value: ms(worst),
        target: `< ${TARGETS.anyPageMs} ms`,
        ok: worst < TARGETS.anyPageMs,
      })
      verdicts.push({
        driver: r.driver,
        check: `get @ ${tag}`,
        value: ms(r.get),
        target: `< ${TARGETS.getMs} ms`,
        ok: r.get < TARGETS.getMs,
      })
      verdicts.push({
        driver: r.driver,
        check: `filtered tasks @ ${tag}`,
        value: ms(Math.max(r.filtered, r.filtered2)),
        target: `< ${TARGETS.filteredMs} ms`,
        ok: Math.max(r.filtered, r.filtered2) < TARGETS.filteredMs,
      })
      for (const [name, k] of [
        ['page 1', 'page1'],
        ['last page', 'last'],
        ['get', 'get'],
        ['filtered', 'filtered'],
      ] as const) {
        const v = r.vsRef[k]
        verdicts.push({
          driver: r.driver,
          check: `${name} @ ${tag} vs @ ${int(b.size)} (alternating)`,
          value: `${v.toFixed(2)}x`,
          target: `≤ ${TARGETS.growth}x`,
          ok: v <= TARGETS.growth,
        })
      }
    }
    if (r.others) {
      const a = alone(r)!
      // Both runs' calls relative to the same reference calls, each measured alongside them.
      const ratio = Math.max(...(['page1', 'get', 'filtered', 'last'] as const).map((k) => r.vsRef[k] / a.vsRef[k]))
      verdicts.push({
        driver: r.driver,
        check: `worst of page 1/last/get/filtered @ ${tag} vs alone`,
        value: `${ratio.toFixed(2)}x`,
        target: `≤ ${1 + TARGETS.others}x`,
        ok: ratio <= 1 + TARGETS.others,
      })
    }
    verdicts.push({
      driver: r.driver,
      check: `creates/s @ ${tag}`,
      value: int(r.createsPerSec),
      target: `≥ ${TARGETS.createsPerSec}`,
      ok: r.createsPerSec >= TARGETS.createsPerSec,
    })
  }
  for (const [driver, s] of Object.entries(small)) {
    verdicts.push({
      driver,
      check: 'bytes on disk per small record (memory row)',
      value: int(s.bytesPerRecord),
      target: `≤ ${TARGETS.bytesPerRecord}`,
      ok: driver === 'fs' || s.bytesPerRecord <= TARGETS.bytesPerRecord,
    })
    verdicts.push({
      driver,
      check: 'creates/s of small records on an empty store',
      value: int(s.createsPerSec),
      target: `≥ ${TARGETS.createsPerSec}`,
      ok: driver === 'fs' || s.createsPerSec >= TARGETS.createsPerSec,
    })
  }
  console.log(
    `\n${table(
      ['driver', 'check', 'value', 'target', ''],
      verdicts.map((v) => [v.driver, v.check, v.value, v.target, v.driver === 'fs' ? '(baseline)' : mark(v.ok)]),
    )}`,
  )
  const missed = verdicts.filter((v) => v.driver !== 'fs' && !v.ok)
  console.log(
    missed.length ? `\n${missed.length} storage target(s) missed (see MISS above).` : '\nEvery storage target met.',
  )
  writeResults('storage', {
    sizes: SIZES,
    others: OTHERS,
    iterations: ITER,
    targets: TARGETS,
    results,
    small,
    verdicts,
  })
}

runAsScript(import.meta.url, main)
