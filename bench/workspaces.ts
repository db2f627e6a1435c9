/**
 * Workspaces benchmark:
 * - transcript appends on the fs driver: buffered as a task writes them (flushed every
 *   50 ms) and flushed after every event (the worst case: one segment each), events/s;
 * - reading a 10,000-event transcript reopened from disk (a fresh storage instance and
 *   event log each round, so nothing is cached): every page the transcript route serves
 *   (`limit=100`), one call for all of it, and the last page alone;
 * - WebSocket fan-out of one real task's token stream (Podman, the offline model) to 500
 *   `ws` clients on loopback in a child process: latency from the server's publish of
 *   each token event to its receipt by each client, p50/p99.
 * Bounded in time (BENCH_WS_TIMEOUT_MS, default 180 s, for the fan-out); stops by itself.
 *
 *   node --import tsx bench/workspaces.ts        (or via bench/run.ts: export main())
 */
import { runAsScript, writeResults } from './lib/results.js'
import { fork, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import WebSocket from 'ws'
import { podmanRuntime } from '@berth/adapter-podman'
import { EventLog, silentLogger, systemClock, type NewEvent, type TaskBusMessage } from '@berth/core'
import { bundleRunner } from '@berth/runner'
import { createBerth, unstorageStore, type BerthOptions } from '@berth/server'
import { ensureEngines } from '@berth/testkit'
import { summarize, wallNow, type Summary } from './lib/stats.js'
import { int, ms, table } from './lib/table.js'
import type { Json } from './soak/api.js'

const EVENTS = Number(process.env.BENCH_TRANSCRIPT_EVENTS ?? 10_000)
const FLUSH_EACH_EVENTS = Number(process.env.BENCH_TRANSCRIPT_FLUSH_EACH ?? 2_000)
const READ_ROUNDS = Number(process.env.BENCH_TRANSCRIPT_ROUNDS ?? 7)
const SUBSCRIBERS = Number(process.env.BENCH_WS_SUBSCRIBERS ?? 500)
/** Words of the task's answer; the offline model streams three per token event. */
const WORDS = Number(process.env.BENCH_WS_WORDS ?? 600)
const WS_TIMEOUT_MS = Number(process.env.BENCH_WS_TIMEOUT_MS ?? 180_000)
const ROOT = fileURLToPath(new URL('../', import.meta.url))
// The repository root does not depend on unstorage: load it the way @berth/server does.
type Storage = NonNullable<BerthOptions['storage']>
const fromServer = createRequire(join(ROOT, 'packages/server/package.json'))
const { createStorage } = fromServer('unstorage') as { createStorage(opts?: { driver?: unknown }): Storage }
const fsDriver = fromServer('unstorage/drivers/fs') as { default?: (o: { base: string }) => unknown } & ((o: {
  base: string
}) => unknown)
const fsStorage = (base: string) => createStorage({ driver: (fsDriver.default ?? fsDriver)({ base }) })
const OWNER = 'usr_bench'
const WS_ID = 'ws_bench'

interface TranscriptResult {
  events: number
  appendBuffered: { eventsPerSecond: number; ms: number; segmentsOnDisk: number; bytesOnDisk: number }
  appendFlushEach: { events: number; eventsPerSecond: number; ms: number; segmentsOnDisk: number }
  /** Reopened from disk each round: open + every page of 100, as the route serves them. */
  readPaged: Summary
  /** Reopened: open + one read of every event. */
  readWhole: Summary
  /** Reopened: open + the last page of 100. */
  readLastPage: Summary
}

interface FanoutResult {
  subscribers: number
  tokenEvents: number
  deliveries: number
  /** Token events published after every client had subscribed (the ones measured). */
  measuredEvents: number
  latencyMs: Summary
  subscribeAllMs: number
  missing: number
}

/** A transcript event like a task writes: mostly token deltas, now and then a tool result. */
function event(i: number): NewEvent {
  if (i % 50 === 49)
    return { type: 'tool_result', task_id: 'task_bench', id: `toolu_${i}`, output: 'x'.repeat(2000), is_error: false }
  return { type: 'token', task_id: 'task_bench', text: `word${i} and more ` }
}

function diskUsage(dir: string): { files: number; bytes: number } {
  let files = 0
  let bytes = 0
  const walk = (d: string) => {
    for (const name of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, name.name)
      if (name.isDirectory()) walk(p)
      else {
        files++
        bytes += statSync(p).size
      }
    }
  }
  if (existsSync(dir)) walk(dir)
  return { files, bytes }
}

/** A fresh fs storage and event log over `dir`: what a restarted server has. */
function openLog(dir: string) {
  const storage = fsStorage(dir)
  // As Berth's embedded fs storage: reads cached in memory (cold right after opening).
  const log = new EventLog(unstorageStore(storage, { cache: true }), systemClock)
  return { storage, log }
}

async function transcriptBench(): Promise<TranscriptResult> {
  const base = mkdtempSync(join(tmpdir(), 'berth-bench-transcript-'))
  try {
    // Appends as a task makes them: bursts of token events, the log flushing every 50 ms.
    const buffered = join(base, 'buffered')
    let { storage, log } = openLog(buffered)
    let t0 = performance.now()
    for (let i = 0; i < EVENTS; i++) {
      await log.append(OWNER, WS_ID, [event(i)])
      if (i % 20 === 19) await new Promise((r) => setImmediate(r))
    }
    await log.flushAll()
    const bufferedMs = performance.now() - t0
    await storage.dispose()
    const bufferedDisk = diskUsage(join(buffered, 'eventlog'))

    // Every event durable at once: a segment per event, compactions as they pile up.
    const each = join(base, 'each')
    ;({ storage, log } = openLog(each))
    t0 = performance.now()
    for (let i = 0; i < FLUSH_EACH_EVENTS; i++) {
      await log.append(OWNER, WS_ID, [event(i)])
      await log.flush(OWNER, WS_ID)
    }
    const eachMs = performance.now() - t0
    await log.flushAll()
    await storage.dispose()
    const eachDisk = diskUsage(join(each, 'eventlog'))

    const paged: number[] = []
    const whole: number[] = []
    const last: number[] = []
    for (let round = 0; round < READ_ROUNDS; round++) {
      for (const [samples, read] of [
        [
          paged,
          async (l: EventLog) => {
            let after = 0
            for (;;) {
              const page = await l.read(OWNER, WS_ID, { after, limit: 100 })
              if (page.length === 0) return after
              after = page[page.length - 1]!.seq
            }
          },
        ],
        [whole, async (l: EventLog) => (await l.read(OWNER, WS_ID, { after: 0, limit: EVENTS })).at(-1)?.seq ?? 0],
        [
          last,
          async (l: EventLog) => (await l.read(OWNER, WS_ID, { after: EVENTS - 100, limit: 100 })).at(-1)?.seq ?? 0,
        ],
      ] as const) {
        const fresh = openLog(buffered)
        const t = performance.now()
        const lastSeq = await read(fresh.log)
        samples.push(performance.now() - t)
        if (lastSeq !== EVENTS) throw new Error(`transcript read ended at ${lastSeq}, expected ${EVENTS}`)
        await fresh.log.flushAll()
        await fresh.storage.dispose()
      }
    }
    return {
      events: EVENTS,
      appendBuffered: {
        eventsPerSecond: (EVENTS / bufferedMs) * 1000,
        ms: bufferedMs,
        segmentsOnDisk: bufferedDisk.files,
        bytesOnDisk: bufferedDisk.bytes,
      },
      appendFlushEach: {
        events: FLUSH_EACH_EVENTS,
        eventsPerSecond: (FLUSH_EACH_EVENTS / eachMs) * 1000,
        ms: eachMs,
        segmentsOnDisk: eachDisk.files,
      },
      readPaged: summarize(paged),
      readWhole: summarize(whole),
      readLastPage: summarize(last),
    }
  } finally {
    rmSync(base, { recursive: true, force: true })
  }
}

/** Messages between the fan-out orchestrator and its client process. */
type ToClients = { type: 'start'; url: string; token: string; n: number } | { type: 'subscribe'; taskId: string }
type FromClients =
  | { type: 'connected' }
  | { type: 'subscribed'; at: number }
  | { type: 'done'; receipts: Record<string, number[]>; missing: number }
  | { type: 'error'; error: string }

/** The client side: `n` sockets, each recording when every token event arrived (wall clock). */
function runClients(): void {
  const send = (m: FromClients) => process.send!(m)
  let sockets: WebSocket[] = []
  process.on('message', async (m: ToClients) => {
    try {
      if (m.type === 'start') {
        for (let i = 0; i < m.n; i += 50) {
          const batch = Array.from({ length: Math.min(50, m.n - i) }, () => {
            const ws = new WebSocket(m.url, {
              headers: { authorization: `Bearer ${m.token}` },
              perMessageDeflate: false,
            })
            return new Promise<WebSocket>((resolve, reject) => ws.once('open', () => resolve(ws)).once('error', reject))
          })
          sockets.push(...(await Promise.all(batch)))
        }
        send({ type: 'connected' })
      } else if (m.type === 'subscribe') {
        const receipts: Record<string, number[]> = {}
        let subscribed = 0
        let finished = 0
        for (const ws of sockets) {
          let first = true
          ws.on('message', (data) => {
            const at = wallNow()
            const msg = JSON.parse(String(data)) as {
              type: string
              status?: string
              event?: { seq: number; type: string }
            }
            if (msg.type === 'task.status' && first) {
              first = false
              if (++subscribed === sockets.length) send({ type: 'subscribed', at: wallNow() })
            }
            if (msg.type === 'task.event' && msg.event!.type === 'token') {
              const seq = msg.event!.seq
              receipts[seq] ??= []
              receipts[seq].push(at)
            }
            if (msg.type === 'task.status' && ['completed', 'failed', 'cancelled'].includes(msg.status!)) {
              if (++finished === sockets.length) {
                const counts = Object.values(receipts).map((r) => r.length)
                const missing = counts.reduce((a, c) => a + (sockets.length - c), 0)
                for (const s of sockets) s.close()
                sockets = []
                // Exit only once the (large) message is out.
                process.send!({ type: 'done', receipts, missing } satisfies FromClients, undefined, {}, () =>
                  process.exit(0),
                )
              }
            }
          })
          ws.send(JSON.stringify({ type: 'subscribe', task_id: m.taskId }))
        }
      }
    } catch (err) {
      send({ type: 'error', error: String((err as Error).stack ?? err) })
    }
  })
}

/** The client process's messages, queued from the start so none is missed between waits. */
function inbox(child: ReturnType<typeof fork>) {
  const queue: FromClients[] = []
  let wake: (() => void) | null = null
  let exited: string | null = null
  child.on('message', (m: FromClients) => {
    queue.push(m)
    wake?.()
  })
  child.on('exit', (code, signal) => {
    exited = `ws clients exited (${signal ?? code})`
    wake?.()
  })
  return async function next<T extends FromClients['type']>(
    type: T,
    timeoutMs: number,
  ): Promise<Extract<FromClients, { type: T }>> {
    const until = Date.now() + timeoutMs
    for (;;) {
      const i = queue.findIndex((m) => m.type === type || m.type === 'error')
      if (i >= 0) {
        const [m] = queue.splice(i, 1)
        if (m!.type === 'error') throw new Error(`ws clients: ${(m as { error: string }).error}`)
        return m as Extract<FromClients, { type: T }>
      }
      if (exited) throw new Error(`${exited} before "${type}"`)
      if (Date.now() > until) throw new Error(`ws clients: no "${type}" within ${timeoutMs} ms`)
      await new Promise<void>((r) => {
        wake = r
        setTimeout(r, 200)
      })
      wake = null
    }
  }
}

function ensureRunnerBundle(): string {
  if (!existsSync(join(ROOT, 'packages/runner/dist/main.js'))) {
    const build = spawnSync('pnpm', ['--filter', '@berth/runner', 'run', 'build'], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    if (build.status !== 0) throw new Error('building @berth/runner failed')
  }
  return bundleRunner(join(ROOT, '.tmp', 'runner-bundle-bench')).dir
}

async function fanoutBench(): Promise<FanoutResult> {
  const [info] = ensureEngines(['podman'])
  const bundleDir = ensureRunnerBundle()
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-ws-'))
  const admin = `bench-admin-${process.pid}`
  const berth = createBerth({
    storage: createStorage(),
    dataDir,
    adminToken: admin,
    logger: silentLogger,
    rateLimit: { rpm: 1e9, burst: 1e9 },
    runtime: podmanRuntime({ socketPath: info!.socketPath }),
    pool: { image: info!.image, min: 1, max: 2, name: `bench-ws-${process.pid}`, spec: { network: 'none' } },
    runner: { bundleDir },
  })
  const server = createServer(berth.handler)
  server.on('upgrade', berth.handleUpgrade)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BERTH_BENCH_WS_CLIENTS: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const next = inbox(child)
  const deadline = setTimeout(() => {
    console.error(`WebSocket fan-out: over ${WS_TIMEOUT_MS} ms, stopping`)
    child.kill('SIGKILL')
  }, WS_TIMEOUT_MS)
  try {
    await berth.ready
    const call = async (path: string, token: string, json?: unknown) => {
      const res = await fetch(url + path, {
        method: json === undefined ? 'GET' : 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          ...(json !== undefined && { 'content-type': 'application/json' }),
        },
        ...(json !== undefined && { body: JSON.stringify(json) }),
      })
      if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`)
      return (await res.json()) as Json
    }
    const { key } = await call('/admin/users', admin, { name: 'Bench' })
    const token = key.token as string
    const apiKey = await call('/v1/api-keys', token, { name: 'offline', provider: 'stub' })
    const profile = await call('/v1/profiles', token, { name: 'Bench', slug: 'bench', api_key_id: apiKey.id })

    // Publish times, taken as the tasks service hands each token event to the bus.
    const published = new Map<number, number>()
    const bus = berth.services.bus
    const publish = bus.publish.bind(bus)
    bus.publish = (m: TaskBusMessage) => {
      if (m.type === 'task.event' && m.event.type === 'token') published.set(m.event.seq, wallNow())
      publish(m)
    }

    child.send({ type: 'start', url: `${url.replace('http', 'ws')}/v1/ws`, token, n: SUBSCRIBERS } satisfies ToClients)
    await next('connected', 60_000)
    const words = Array.from({ length: WORDS }, (_, i) => `w${i}`).join(' ')
    const task = await call('/v1/tasks', token, {
      mode: 'batch',
      profile_id: profile.id,
      prompt: `Stream. [[berth:slow 20]] [[berth:text ${words}]]`,
    })
    const t0 = wallNow()
    child.send({ type: 'subscribe', taskId: task.task_id } satisfies ToClients)
    const subscribed = await next('subscribed', 60_000)
    const done = await next('done', WS_TIMEOUT_MS)
    const finished = await call(`/v1/tasks/${task.task_id}`, token)
    if (finished.status !== 'completed')
      throw new Error(`the streaming task ended ${finished.status}: ${JSON.stringify(finished.error)}`)
    const latencies: number[] = []
    let measured = 0
    let deliveries = 0
    for (const [seq, at] of published) {
      const got = done.receipts[seq] ?? []
      deliveries += got.length
      // Events published before every client had subscribed reached some as history.
      if (at < subscribed.at) continue
      measured++
      for (const r of got) latencies.push(r - at)
    }
    return {
      subscribers: SUBSCRIBERS,
      tokenEvents: published.size,
      deliveries,
      measuredEvents: measured,
      latencyMs: summarize(latencies),
      subscribeAllMs: subscribed.at - t0,
      missing: done.missing,
    }
  } finally {
    clearTimeout(deadline)
    child.kill('SIGKILL')
    server.closeAllConnections()
    await berth.close({ removeContainers: true })
    await new Promise<void>((r) => server.close(() => r()))
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Run the workspaces benchmark, print its tables and write bench/results/workspaces.json. */
export async function main(): Promise<{ transcript: TranscriptResult; fanout: FanoutResult }> {
  console.log(
    `\nWorkspaces benchmark: transcript of ${int(EVENTS)} events on the fs driver, ${READ_ROUNDS} read rounds…`,
  )
  const transcript = await transcriptBench()
  console.log('\nTranscript on the unstorage fs driver')
  console.log(
    table(
      ['measurement', 'events', 'events/s', 'ms', 'segments on disk'],
      [
        [
          'append, buffered (flush every 50 ms)',
          int(transcript.events),
          int(transcript.appendBuffered.eventsPerSecond),
          ms(transcript.appendBuffered.ms),
          int(transcript.appendBuffered.segmentsOnDisk),
        ],
        [
          'append + flush after every event',
          int(transcript.appendFlushEach.events),
          int(transcript.appendFlushEach.eventsPerSecond),
          ms(transcript.appendFlushEach.ms),
          int(transcript.appendFlushEach.segmentsOnDisk),
        ],
      ],
    ),
  )
  console.log(
    `\nReading the ${int(EVENTS)}-event transcript reopened from disk (${(transcript.appendBuffered.bytesOnDisk / 1024 / 1024).toFixed(2)} MiB; open included; ms)`,
  )
  console.log(
    table(
      ['read', 'p50', 'p99', 'min', 'n'],
      [
        [
          'every page of 100 (the route, 100 calls)',
          ms(transcript.readPaged.p50),
          ms(transcript.readPaged.p99),
          ms(transcript.readPaged.min),
          int(transcript.readPaged.n),
        ],
        [
          `all ${int(EVENTS)} in one call`,
          ms(transcript.readWhole.p50),
          ms(transcript.readWhole.p99),
          ms(transcript.readWhole.min),
          int(transcript.readWhole.n),
        ],
        [
          'the last page of 100',
          ms(transcript.readLastPage.p50),
          ms(transcript.readLastPage.p99),
          ms(transcript.readLastPage.min),
          int(transcript.readLastPage.n),
        ],
      ],
    ),
  )

  console.log(`\nWebSocket fan-out: one task's token stream to ${SUBSCRIBERS} subscribers (Podman, offline model)…`)
  const fanout = await fanoutBench()
  console.log(
    table(
      ['subscribers', 'token events', 'measured', 'deliveries', 'missing', 'p50 ms', 'p99 ms', 'max ms'],
      [
        [
          int(fanout.subscribers),
          int(fanout.tokenEvents),
          int(fanout.measuredEvents),
          int(fanout.deliveries),
          int(fanout.missing),
          ms(fanout.latencyMs.p50),
          ms(fanout.latencyMs.p99),
          ms(fanout.latencyMs.max),
        ],
      ],
    ),
  )

  writeResults('workspaces', { transcript, fanout })
  return { transcript, fanout }
}

if (process.env.BERTH_BENCH_WS_CLIENTS === '1') runClients()
else runAsScript(import.meta.url, main)
