/**
 * Several instances on one Redis, on one machine:
 * - throughput: N offline-model batch tasks (one turn, `ok`) spread round-robin over 1, 2
 *   and 3 standalone servers (real child processes, `BERTH_STORAGE=redis` on a private
 *   `redis-server`, each its own warm pool on Docker), wall time from the first submit to
 *   the last `completed` → tasks per minute. Limits are raised so they do not cap it.
 * - coordination cost: each operation of the redis driver against the memory driver
 *   (rate take, slot acquire and release, single-use claim, queue add/take/ack), one at a
 *   time from this process, p50 and p99.
 *
 *   node --import tsx bench/instances.ts        (or via bench/run.ts: export main())
 *
 * Knobs: BENCH_INSTANCES_TASKS (30), BENCH_INSTANCES_COUNTS (`1,2,3`),
 * BENCH_INSTANCES_POOL_MIN (2, per instance), BENCH_INSTANCES_ENGINE (`docker`),
 * BENCH_COORD_OPS (2000).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { connectEngine } from '@berth/adapter-docker'
import { memoryCoordination, type Coordination } from '@berth/core'
import { createCoordination } from '@berth/server'
import { ensureEngines, startRedis, type EngineInfo, type LocalRedis } from '@berth/testkit'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize, type Summary } from './lib/stats.js'
import { ms, table } from './lib/table.js'
import type { Json } from './soak/api.js'

const env = process.env
const TASKS = Number(env.BENCH_INSTANCES_TASKS ?? 30)
const COUNTS = (env.BENCH_INSTANCES_COUNTS ?? '1,2,3')
  .split(',')
  .map(Number)
  .filter((n) => n > 0)
const POOL_MIN = Number(env.BENCH_INSTANCES_POOL_MIN ?? 2)
const ENGINE = (env.BENCH_INSTANCES_ENGINE ?? 'docker') as EngineInfo['engine']
const OPS = Number(env.BENCH_COORD_OPS ?? 2000)
const TASK_TIMEOUT_MS = 300_000
if (TASKS > 100) throw new Error('BENCH_INSTANCES_TASKS: at most 100 (one page of GET /v1/tasks)')

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const EXAMPLE = join(ROOT, 'examples/standalone-server')
const SERVER = [
  process.execPath,
  '--import',
  pathToFileURL(join(EXAMPLE, 'node_modules/tsx/dist/loader.mjs')).href,
  join(EXAMPLE, 'src/main.ts'),
]
const ADMIN = `bench-${randomBytes(6).toString('hex')}`

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const { port } = s.address() as { port: number }
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

interface Server {
  url: string
  child: ChildProcess
  pool: string
  dataDir: string
}

/** A standalone server on the shared Redis; resolves once `/health` answers. */
async function startServer(engine: EngineInfo, redis: LocalRedis, prefix: string, n: number): Promise<Server> {
  const port = await freePort()
  const pool = `bench-inst-${n}-${randomBytes(3).toString('hex')}`
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-inst-'))
  const child = spawn(SERVER[0]!, SERVER.slice(1), {
    cwd: EXAMPLE,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: env.PATH ?? '/usr/bin:/bin',
      HOME: env.HOME ?? '/root',
      PORT: String(port),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_STORAGE: 'redis',
      BERTH_REDIS_URL: redis.path,
      BERTH_REDIS_PREFIX: prefix,
      BERTH_INSTANCE_ID: `bench-${n}-${pool}`,
      BERTH_DATA_DIR: dataDir,
      BERTH_POOL_NAME: pool,
      BERTH_POOL_MIN: String(POOL_MIN),
      BERTH_RUNTIME: engine.engine,
      BERTH_ENGINE_URL: `unix://${engine.socketPath}`,
      BERTH_IMAGE: engine.image,
      BERTH_CONCURRENCY: '1000',
      BERTH_RATE_RPM: '1000000',
      BERTH_RATE_BURST: '100000',
    },
  })
  let err = ''
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()))
  const url = `http://127.0.0.1:${port}`
  for (const until = Date.now() + 120_000; ; ) {
    if (child.exitCode !== null) throw new Error(`instance ${n} exited: ${err}`)
    if (Date.now() > until) throw new Error(`instance ${n} did not answer /health: ${err}`)
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break
    await new Promise((r) => setTimeout(r, 200))
  }
  // Ready means the warm pool is filled: every instance starts the race at `min` idle.
  return { url, child, pool, dataDir }
}

async function stopServer(s: Server, engine: EngineInfo): Promise<void> {
  const gone = new Promise((r) => s.child.once('exit', r))
  try {
    process.kill(-s.child.pid!, 'SIGTERM')
  } catch {
    // already gone
  }
  await gone
  // The warm containers it leaves for its next start, and nothing else.
  const { docker } = connectEngine({ socketPath: engine.socketPath })
  const left = await docker.listContainers({ all: true, filters: { label: [`berth.pool=${s.pool}`] } })
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  )
  rmSync(s.dataDir, { recursive: true, force: true })
}

async function json(url: string, token: string, method: string, body?: unknown): Promise<Json> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`)
  return JSON.parse(text)
}

/** N tasks round-robin over `servers`; wall time from the first submit to the last completion. */
async function throughput(
  servers: Server[],
): Promise<{ instances: number; tasks: number; seconds: number; perMinute: number }> {
  const first = servers[0]!.url
  const user = await json(`${first}/admin/users`, ADMIN, 'POST', { name: 'bench' })
  const token = user.key.token as string
  const key = await json(`${first}/v1/api-keys`, token, 'POST', { name: 'offline', provider: 'stub' })
  const profile = await json(`${first}/v1/profiles`, token, 'POST', {
    name: 'Bench',
    slug: 'bench',
    api_key_id: key.id,
  })
  const t0 = performance.now()
  const ids = await Promise.all(
    Array.from({ length: TASKS }, (_, i) =>
      json(`${servers[i % servers.length]!.url}/v1/tasks`, token, 'POST', {
        mode: 'batch',
        profile_id: profile.id,
        prompt: '[[berth:text ok]]',
      }).then((r) => r.task_id as string),
    ),
  )
  const pending = new Set(ids)
  while (pending.size) {
    if (performance.now() - t0 > TASK_TIMEOUT_MS)
      throw new Error(`${pending.size} tasks not done after ${TASK_TIMEOUT_MS} ms`)
    await new Promise((r) => setTimeout(r, 100))
    const list = await json(`${first}/v1/tasks?limit=100`, token, 'GET')
    for (const t of list.data ?? list.tasks ?? list) {
      if (!pending.has(t.task_id ?? t.id)) continue
      if (t.status === 'completed') pending.delete(t.task_id ?? t.id)
      else if (t.status === 'failed' || t.status === 'cancelled')
        throw new Error(`task ${t.task_id ?? t.id} ${t.status}: ${JSON.stringify(t.error)}`)
    }
  }
  const seconds = (performance.now() - t0) / 1000
  return { instances: servers.length, tasks: TASKS, seconds, perMinute: (TASKS / seconds) * 60 }
}

type OpName = 'rate take' | 'slot acquire' | 'slot release' | 'once claim' | 'queue add' | 'queue take' | 'queue ack'

/** Each operation `OPS` times, one at a time: milliseconds per call. */
async function coordinationCost(coord: Coordination): Promise<Record<OpName, Summary>> {
  const samples = {} as Record<OpName, number[]>
  const time = async (name: OpName, fn: () => Promise<unknown>) => {
    const t = performance.now()
    await fn()
    samples[name] ??= []
    samples[name].push(performance.now() - t)
  }
  const tag = randomBytes(3).toString('hex')
  for (let i = 0; i < OPS; i++) {
    await time('rate take', () => coord.rates.take(`bench-${tag}-${i % 50}`, { rpm: 1_000_000, burst: 1_000_000 }))
    let lease: Awaited<ReturnType<Coordination['slots']['acquire']>> = null
    await time('slot acquire', async () => (lease = await coord.slots.acquire(`bench-${tag}`, 1_000, `h${i}`, 60_000)))
    if (!lease) throw new Error('slot acquire refused under its limit')
    await time('slot release', () => coord.slots.release(lease!))
    await time('once claim', () => coord.once.claimOnce(`bench-${tag}-${i}`, 60_000))
  }
  const queue = coord.queue<{ n: number }>(`bench-${tag}`)
  for (let i = 0; i < OPS; i++)
    await time('queue add', () => queue.add({ id: `j${i}`, owner: `o${i % 7}`, payload: { n: i } }))
  for (let i = 0; i < OPS; i++) {
    let job: Awaited<ReturnType<typeof queue.take>> = null
    await time('queue take', async () => (job = await queue.take()))
    if (!job) throw new Error(`queue emptied after ${i} of ${OPS} jobs`)
    await time('queue ack', () => queue.ack(job!))
  }
  return Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) as Record<OpName, Summary>
}

/**
 * Run both parts, print their tables and write bench/results/instances.json.
 *
 * @example
 * ```ts
 * await main()
 * ```
 */
export async function main(): Promise<unknown> {
  const engine = ensureEngines([ENGINE]).find((e) => e.engine === ENGINE)
  if (!engine) throw new Error(`engine ${ENGINE} is not available`)
  const redis = await startRedis()
  try {
    console.log(
      `\nInstances on one Redis (${ENGINE}, ${TASKS} one-turn offline tasks, pool min ${POOL_MIN} per instance)`,
    )
    const runs = []
    for (const count of COUNTS) {
      const prefix = `bench-${count}-${randomBytes(3).toString('hex')}:`
      const servers: Server[] = []
      try {
        for (let n = 0; n < count; n++) servers.push(await startServer(engine, redis, prefix, n))
        runs.push(await throughput(servers))
      } finally {
        for (const s of servers) await stopServer(s, engine)
      }
    }
    const one = runs[0]?.perMinute ?? NaN
    console.log(
      table(
        ['instances', 'tasks', 'seconds', 'tasks/min', 'vs 1'],
        runs.map((r) => [
          String(r.instances),
          String(r.tasks),
          r.seconds.toFixed(1),
          r.perMinute.toFixed(0),
          `${(r.perMinute / one).toFixed(2)}x`,
        ]),
      ),
    )

    console.log(`\nCoordination cost per operation, ${OPS} each, one at a time (ms)`)
    const memory = await coordinationCost(memoryCoordination({}))
    const coord = await createCoordination({
      driver: 'redis',
      url: redis.path,
      prefix: `bench-coord-${randomBytes(3).toString('hex')}:`,
      instanceId: `bench-${process.pid}`,
    })
    let redisCost: Record<OpName, Summary>
    try {
      redisCost = await coordinationCost(coord)
    } finally {
      await coord.close()
    }
    const ops = Object.keys(memory) as OpName[]
    console.log(
      table(
        ['operation', 'memory p50', 'memory p99', 'redis p50', 'redis p99'],
        ops.map((op) => [op, ms(memory[op].p50), ms(memory[op].p99), ms(redisCost[op].p50), ms(redisCost[op].p99)]),
      ),
    )
    const results = {
      engine: ENGINE,
      tasks: TASKS,
      poolMin: POOL_MIN,
      throughput: runs,
      coordination: { ops: OPS, memory, redis: redisCost },
    }
    writeResults('instances', results)
    return results
  } finally {
    await redis.stop()
  }
}

runAsScript(import.meta.url, main)
