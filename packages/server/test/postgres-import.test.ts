/**
 * The Postgres store's bulk path (`importMany`): a store filled in bulk lists, counts and
 * reads exactly like one filled key by key, including keys it replaces and keys it moves
 * out of an index.
 */
import { indexEntryFor, type Store } from '@berth/core'
import { memoryStore, postgresStore, type ImportRow, type PostgresStore } from '@berth/server'
import { startPostgres, type LocalPostgres } from '@berth/testkit'
import { afterAll, beforeAll, expect, it } from 'vitest'

let pg: LocalPostgres
let store: PostgresStore
beforeAll(async () => {
  pg = await startPostgres()
  store = await postgresStore(pg.url, { max: 2 })
}, 60_000)
afterAll(async () => {
  await store?.close()
  await pg?.stop()
})

const STATUSES = ['queued', 'running', 'completed', 'failed']
const task = (n: number, status = STATUSES[n % 4]) => {
  const id = `task_${String(n).padStart(6, '0')}`
  const key = `tasks:usr_a:${id}`
  const value = { id, owner_id: 'usr_a', status, mode: n % 2 ? 'batch' : 'session', created_at: `2026-01-01T${n}` }
  return { key, value, entry: indexEntryFor(key, value)! }
}

/** Every page of every index the tasks are listed in, with its total. */
async function view(s: Store) {
  const out: Record<string, unknown> = {}
  for (const term of [undefined, ...STATUSES.map((x) => `status=${x}`), 'mode=batch', 'mode=batch,status=failed']) {
    out[term ?? 'all'] = await s.list('tasks:usr_a', { term, offset: 0, limit: 1000 })
  }
  out.loose = await s.get('notes:usr_a:n1')
  out.gone = await s.get('tasks:usr_a:task_000002')
  return out
}

it('fills, replaces and re-indexes in bulk exactly as writes one by one do', async () => {
  const oracle = memoryStore()
  // Some records exist before the import: it must move them between indexes, not count them twice.
  for (let n = 0; n < 10; n++) {
    const t = task(n)
    await store.put(t.key, t.value, t.entry)
    await oracle.put(t.key, t.value, t.entry)
  }
  const rows: ImportRow[] = [
    ...Array.from({ length: 300 }, (_, n) => task(n + 5)), // 5..9 replaced unchanged, the rest new
    ...[0, 1, 3].map((n) => task(n, 'failed')), // existing records change status
    { key: 'tasks:usr_a:task_000002', value: { stray: true }, entry: null }, // leaves every index
    { key: 'notes:usr_a:n1', value: { text: 'outside any index' }, entry: null },
    task(7, 'completed'), // a key twice in one import: the last row wins
  ]
  await store.importMany(rows)
  for (const r of rows) await (r.entry ? oracle.put(r.key, r.value, r.entry) : oracle.set(r.key, r.value))

  expect(await view(store)).toEqual(await view(oracle))
  const all = await store.list('tasks:usr_a', { offset: 0, limit: 0 })
  expect(all.total).toBe(304)
})

it('refuses an undefined value before writing anything', async () => {
  const before = await store.keys('')
  await expect(
    store.importMany([
      { key: 'x:usr_b:1', value: { ok: 1 }, entry: null },
      { key: 'x:usr_b:2', value: undefined, entry: null },
    ]),
  ).rejects.toThrow(/undefined value/)
  expect(await store.keys('')).toEqual(before)
})
