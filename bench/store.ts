/**
 * Store benchmark, driver against driver (SQLite, Redis, Postgres), through the `Store`
 * port itself (no HTTP): what the transcript and the lists cost on each.
 *
 * - Transcript: 10,000 events appended to one workspace's log through core's `EventLog`
 *   (20 events per append, as a runner's bursts arrive), events per second until the last
 *   is stored; then the whole transcript read back by a freshly opened log (nothing
 *   cached: its segment keys listed, the segments read), median of the runs.
 * - Lists: BENCH_STORE_TASKS task records of one caller (10,000) written with their index
 *   entries (records per second, 32 writes in flight), then page 1, a middle page and a
 *   filtered page (`status=failed`, `limit=20`), median of the runs.
 *
 * Postgres and Redis are throwaway servers started here (Debian's, on loopback or a unix
 * socket; Postgres with fsync off, Redis without persistence), SQLite a temporary file.
 * Knobs: BENCH_STORE_DRIVERS (`sqlite,redis,postgres`), BENCH_STORE_EVENTS (10000),
 * BENCH_STORE_TASKS (10000), BENCH_STORE_ITERATIONS (20).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventLog, indexEntryFor, systemClock, type Store } from '@berth/core'
import { postgresStore, redisStore, sqliteStore } from '@berth/server'
import { startPostgres, startRedis } from '@berth/testkit'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize } from './lib/stats.js'
import { int, ms, table } from './lib/table.js'

const env = process.env
const DRIVERS = (env.BENCH_STORE_DRIVERS ?? 'sqlite,redis,postgres').split(',')
const EVENTS = Number(env.BENCH_STORE_EVENTS ?? 10_000)
const TASKS = Number(env.BENCH_STORE_TASKS ?? 10_000)
const ITER = Number(env.BENCH_STORE_ITERATIONS ?? 20)
const STATUSES = ['queued', 'running', 'completed', 'failed']

/** A store of each driver, and how to get rid of it. */
async function open(driver: string): Promise<{ store: Store; done(): Promise<void> }> {
  if (driver === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-'))
    const store = sqliteStore(join(dir, 'berth.db'))
    return {
      store,
      done: async () => {
        await store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  if (driver === 'redis') {
    const redis = await startRedis()
    const store = redisStore({ client: redis.connect() })
    return {
      store,
      done: async () => {
        await store.close()
        await redis.stop()
      },
    }
  }
  if (driver === 'postgres') {
    const pg = await startPostgres()
    const store = await postgresStore(pg.url)
    return {
      store,
      done: async () => {
        await store.close()
        await pg.stop()
      },
    }
  }
  throw new Error(`unknown driver ${driver}`)
}

const time = async (fn: () => Promise<unknown>) => {
  const t = performance.now()
  await fn()
  return performance.now() - t
}

async function transcript(store: Store) {
  const log = new EventLog(store, systemClock, { flushMs: 5 })
  const text = 'a token of agent output, about as long as a delta usually is'
  const appendMs = await time(async () => {
    for (let i = 0; i < EVENTS; i += 20) {
      const batch = Array.from({ length: Math.min(20, EVENTS - i) }, (_, j) => ({
        type: 'token' as const,
        task_id: 'task_bench',
        text: `${text} ${i + j}`,
      }))
      await log.append('usr_bench', 'ws_bench', batch)
    }
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

async function lists(store: Store) {
  const writeMs = await time(async () => {
    for (let i = 0; i < TASKS; i += 32) {
      await Promise.all(
        Array.from({ length: Math.min(32, TASKS - i) }, (_, j) => {
          const n = i + j
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
          return store.put(key, value, indexEntryFor(key, value)!)
        }),
      )
    }
  })
  const page = async (q: { term?: string; offset: number }) => {
    const samples: number[] = []
    for (let i = 0; i < ITER; i++) samples.push(await time(() => store.list('tasks:usr_bench', { ...q, limit: 20 })))
    return summarize(samples).p50
  }
  return {
    writesPerSec: TASKS / (writeMs / 1000),
    page1Ms: await page({ offset: 0 }),
    middleMs: await page({ offset: Math.floor(TASKS / 2) }),
    filteredMs: await page({ term: 'status=failed', offset: 0 }),
  }
}

export async function main(): Promise<void> {
  const results: Record<string, unknown>[] = []
  for (const driver of DRIVERS) {
    const { store, done } = await open(driver)
    try {
      results.push({ driver, ...(await transcript(store)), ...(await lists(store)) })
    } finally {
      await done()
    }
  }
  console.log(`\nStore: ${int(EVENTS)}-event transcript, ${int(TASKS)} tasks of one caller (medians of ${ITER} runs)\n`)
  const r = results as {
    driver: string
    appendPerSec: number
    readMs: number
    writesPerSec: number
    page1Ms: number
    middleMs: number
    filteredMs: number
  }[]
  console.log(
    table(
      [
        'driver',
        'events/s appended',
        'transcript read ms',
        'tasks/s written',
        'page 1 ms',
        'middle page ms',
        'filtered ms',
      ],
      r.map((x) => [
        x.driver,
        int(x.appendPerSec),
        ms(x.readMs),
        int(x.writesPerSec),
        ms(x.page1Ms),
        ms(x.middleMs),
        ms(x.filteredMs),
      ]),
    ),
  )
  writeResults('store', { events: EVENTS, tasks: TASKS, iterations: ITER, results })
}

runAsScript(import.meta.url, main)
