/**
 * Store benchmark, driver against driver (SQLite, Redis, Postgres), through the `Store`
 * port itself (no HTTP): what the transcript and the lists cost on each, at a scale.
 *
 * - Transcript: BENCH_STORE_ROWS events in all, as workspaces of BENCH_STORE_EVENTS events
 *   each: all but one seeded first through core's `EventLog` (1,000 events per append);
 *   then the last workspace's events appended 20 at a time (events per second until the
 *   last is stored), and that transcript read whole by a freshly opened log (nothing
 *   cached), median of the runs.
 * - Lists: BENCH_STORE_TASKS task records of one caller written with their index entries
 *   through `Store.put` (records per second, 32 writes in flight), then the same caller's
 *   records topped up to BENCH_STORE_ROWS through the driver's bulk path (see
 *   lib/store-drivers.ts; not timed as a figure), then page 1, a deep page (the middle:
 *   pages are numbered, `page` × `limit` is an offset, and the middle is the farthest
 *   from both ends), a filtered page (`status=failed`), all `limit=20`, and one task read
 *   by key (a different one each time), median of the runs; and the same deep page read
 *   by key (`after`, what a `cursor` carries): an index range from the previous page's
 *   last record, whatever the depth.
 *
 * Knobs: BENCH_STORE_DRIVERS (`sqlite,redis,postgres`), BENCH_STORE_ROWS (20000; 1000000
 * for the README's figure), BENCH_STORE_EVENTS (10000), BENCH_STORE_TASKS (10000),
 * BENCH_STORE_ITERATIONS (20).
 */
import { loadavg } from 'node:os'
import { EventLog, indexEntryFor, systemClock, type Store } from '@berth/core'
import type { ImportRow } from '@berth/server'
import { openBenchStore } from './lib/store-drivers.js'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize } from './lib/stats.js'
import { int, ms, table } from './lib/table.js'

const env = process.env
const DRIVERS = (env.BENCH_STORE_DRIVERS ?? 'sqlite,redis,postgres').split(',')
const EVENTS = Number(env.BENCH_STORE_EVENTS ?? 10_000)
const TASKS = Number(env.BENCH_STORE_TASKS ?? 10_000)
const ROWS = Math.max(TASKS, EVENTS, Number(env.BENCH_STORE_ROWS ?? 20_000))
const ITER = Number(env.BENCH_STORE_ITERATIONS ?? 20)
const STATUSES = ['queued', 'running', 'completed', 'failed']
const TEXT = 'a token of agent output, about as long as a delta usually is'

const time = async (fn: () => Promise<unknown>) => {
  const t = performance.now()
  await fn()
  return performance.now() - t
}

const token = (i: number) => ({ type: 'token' as const, task_id: 'task_bench', text: `${TEXT} ${i}` })

/** The other workspaces' transcripts, EVENTS events each, until the whole set holds ROWS events. */
async function seedTranscripts(store: Store) {
  const log = new EventLog(store, systemClock, { flushMs: 5 })
  const others = Math.floor(ROWS / EVENTS) - 1
  for (let w = 0; w < others; w++) {
    const ws = `ws_seed_${String(w).padStart(6, '0')}`
    for (let i = 0; i < EVENTS; i += 1000)
      await log.append(
        'usr_seed',
        ws,
        Array.from({ length: Math.min(1000, EVENTS - i) }, (_, j) => token(i + j)),
      )
    await log.flush('usr_seed', ws)
  }
}

async function transcript(store: Store) {
  const log = new EventLog(store, systemClock, { flushMs: 5 })
  const appendMs = await time(async () => {
    for (let i = 0; i < EVENTS; i += 20)
      await log.append(
        'usr_bench',
        'ws_bench',
        Array.from({ length: Math.min(20, EVENTS - i) }, (_, j) => token(i + j)),
      )
    await log.flush('usr_bench', 'ws_bench')
  })
  const reads: number[] = []
  for (let i = 0; i < ITER; i++) {
    const fresh = new EventLog(store, systemClock)
    let got = 0
    reads.push(
      await time(async () => (got = (await fresh.read('usr_bench', 'ws_bench', { after: 0, limit: EVENTS })).length)),
    )
    if (got !== EVENTS) throw new Error(`read ${got} events, wrote ${EVENTS}`)
  }
  return { appendPerSec: EVENTS / (appendMs / 1000), readMs: summarize(reads).p50 }
}

/** Task record `n` of the bench's caller, with its key and index entry. */
function taskRow(n: number): ImportRow & { key: string } {
  const id = `task_${String(n).padStart(8, '0')}`
  const key = `tasks:usr_bench:${id}`
  const value = {
    id,
    owner_id: 'usr_bench',
    status: STATUSES[n % 4],
    mode: n % 2 ? 'batch' : 'session',
    created_at: new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString(),
    prompt: 'summarise the repository and open a pull request with the changes',
  }
  return { key, value, entry: indexEntryFor(key, value)! }
}

async function lists(store: Store, bulk: (rows: ImportRow[]) => Promise<void>, settle: () => Promise<void>) {
  const writeMs = await time(async () => {
    for (let i = 0; i < TASKS; i += 32)
      await Promise.all(
        Array.from({ length: Math.min(32, TASKS - i) }, (_, j) => {
          const r = taskRow(i + j)
          return store.put(r.key, r.value, r.entry!)
        }),
      )
  })
  const seedMs = await time(async () => {
    for (let i = TASKS; i < ROWS; i += 5000)
      await bulk(Array.from({ length: Math.min(5000, ROWS - i) }, (_, j) => taskRow(i + j)))
    await settle()
  })
  const { total } = await store.list('tasks:usr_bench', { offset: 0, limit: 0 })
  if (total !== ROWS) throw new Error(`listed ${total} tasks, wrote ${ROWS}`)
  const p50 = async (fn: (i: number) => Promise<unknown>) => {
    const samples: number[] = []
    for (let i = 0; i < ITER; i++) samples.push(await time(() => fn(i)))
    return summarize(samples).p50
  }
  const page = (q: { term?: string; offset: number; after?: string }) =>
    p50(() => store.list('tasks:usr_bench', { ...q, limit: 20 }))
  // The same deep page reached by key: the order of the record just above it (newest first,
  // the record at offset k is number ROWS - 1 - k), as a cursor carries it.
  const deep = Math.floor(ROWS / 2)
  const after = taskRow(ROWS - deep).entry!.order
  const [byOffset, byKey] = await Promise.all([
    store.list<{ id: string }>('tasks:usr_bench', { offset: deep, limit: 20 }),
    store.list<{ id: string }>('tasks:usr_bench', { offset: 0, limit: 20, after }),
  ])
  if (byOffset.items.map((r) => r.id).join() !== byKey.items.map((r) => r.id).join())
    throw new Error('the page by key is not the page by offset')
  return {
    writesPerSec: TASKS / (writeMs / 1000),
    seedSeconds: seedMs / 1000,
    page1Ms: await page({ offset: 0 }),
    deepMs: await page({ offset: deep }),
    deepCursorMs: await page({ offset: 0, after }),
    filteredMs: await page({ term: 'status=failed', offset: 0 }),
    getMs: await p50(async (i) => {
      const key = taskRow(Math.floor(((i + 0.5) * ROWS) / ITER)).key
      if (!(await store.get(key))) throw new Error(`${key} is missing`)
    }),
  }
}

type Result = {
  driver: string
  transcriptSeedSeconds: number
  appendPerSec: number
  readMs: number
  writesPerSec: number
  seedSeconds: number
  page1Ms: number
  deepMs: number
  deepCursorMs: number
  filteredMs: number
  getMs: number
}

export async function main(): Promise<void> {
  const results: Result[] = []
  const load = loadavg()
  for (const driver of DRIVERS) {
    const { store, bulk, settle, done } = await openBenchStore(driver)
    try {
      const transcriptSeedSeconds = (await time(() => seedTranscripts(store))) / 1000
      results.push({
        driver,
        transcriptSeedSeconds,
        ...(await transcript(store)),
        ...(await lists(store, bulk, settle)),
      })
    } finally {
      await done()
    }
  }
  const loadNote = `load average ${load.map((x) => x.toFixed(1)).join(' ')} before, ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} after`
  console.log(
    `\nStore: ${int(ROWS)} task records of one caller and ${int(ROWS)} transcript events (${int(ROWS / EVENTS)} workspaces); medians of ${ITER} runs; ${loadNote}\n`,
  )
  console.log(
    table(
      [
        'driver',
        'events/s appended',
        `${int(EVENTS)}-event read ms`,
        'tasks/s written',
        'page 1 ms',
        'deep page ms',
        'deep by cursor ms',
        'filtered ms',
        'task read ms',
        'seed s',
      ],
      results.map((x) => [
        x.driver,
        int(x.appendPerSec),
        ms(x.readMs),
        int(x.writesPerSec),
        ms(x.page1Ms),
        ms(x.deepMs),
        ms(x.deepCursorMs),
        ms(x.filteredMs),
        ms(x.getMs),
        (x.transcriptSeedSeconds + x.seedSeconds).toFixed(1),
      ]),
    ),
  )
  writeResults('store', { rows: ROWS, events: EVENTS, tasks: TASKS, iterations: ITER, loadavg: loadNote, results })
}

runAsScript(import.meta.url, main)
