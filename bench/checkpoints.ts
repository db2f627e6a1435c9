/**
 * Checkpoints of sessions: what keeping one costs a task's end, and the space it adds, for a
 * workspace of 1 MB and of 100 MB (incompressible files) where each task changes one small
 * file, per runtime. Core's `Checkpoints` runs as a session task's run calls it, on a real
 * container, with the records in SQLite and the contents as blob files under a temp dir, as
 * `pnpm start` keeps them. Each round is a fresh session: its first checkpoint holds every
 * file, the later ones only what changed. The table gives the median over the rounds of
 * each round's median, the spread (lowest and highest round), and the machine's load.
 *
 * Knobs: BENCH_CHECKPOINT_RUNTIMES (`docker,podman,local`), BENCH_CHECKPOINT_SIZES_MB (`1,100`),
 * BENCH_CHECKPOINT_TASKS (10 per round), BENCH_CHECKPOINT_ROUNDS (3).
 *
 *   node --import tsx bench/checkpoints.ts        (or via bench/run.ts: export main())
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { localRuntime } from '@berth/adapter-local'
import { podmanRuntime } from '@berth/adapter-podman'
import { EventLog, silentLogger, systemClock, type ContainerRuntime } from '@berth/core'
import { sqliteStore } from '@berth/server'
import { ensureEngines, packTar } from '@berth/testkit'
import { fileBlobs } from '../packages/server/src/blob-files.js'
import { Checkpoints } from '../packages/core/src/workspaces/checkpoints.js'
import type { TaskEngine } from '../packages/core/src/tasks/engine.js'
import type { TaskRecord } from '../packages/core/src/tasks/task.js'
import type { WorkspaceRecord } from '../packages/core/src/workspaces/workspaces.js'
import { busyCores, machineCpu } from './lib/machine.js'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize } from './lib/stats.js'
import { ms, table } from './lib/table.js'

const env = process.env
const list = (raw: string) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
const RUNTIMES = list(env.BENCH_CHECKPOINT_RUNTIMES ?? 'docker,podman,local')
const SIZES_MB = list(env.BENCH_CHECKPOINT_SIZES_MB ?? '1,100').map(Number)
const TASKS = Number(env.BENCH_CHECKPOINT_TASKS ?? 10)
const ROUNDS = Number(env.BENCH_CHECKPOINT_ROUNDS ?? 3)
const OWNER = 'usr_bench'
const MiB = 1024 * 1024

interface Row {
  runtime: string
  sizeMb: number
  /** The first checkpoint of a session (every file), ms: median over the rounds, and each round's. */
  firstMs: number
  firstMsRounds: number[]
  /** A later checkpoint (one small file changed), ms: median of the rounds' medians, and each round's median. */
  laterMs: number
  laterMsRounds: number[]
  /** Bytes a checkpoint added: the first, and a later one (median). */
  firstAddedBytes: number
  laterAddedBytes: number
  /** Cores the whole machine kept busy during the rounds, and the load average before. */
  busyCores: number
  loadBefore: number
}

/** A runtime and its image, and how to let it go. */
function runtimeFor(name: string): { runtime: ContainerRuntime; image: string; close(): Promise<void> } {
  if (name === 'local') {
    const dir = mkdtempSync(join(tmpdir(), 'berth-bench-ckpt-rt-'))
    const runtime = localRuntime({ baseDir: dir, logger: silentLogger, sandbox: 'bwrap' })
    return { runtime, image: 'local', close: async () => rmSync(dir, { recursive: true, force: true }) }
  }
  const [info] = ensureEngines([name as 'docker' | 'podman'])
  const runtime = (name === 'docker' ? dockerRuntime : podmanRuntime)({ socketPath: info!.socketPath })
  return { runtime, image: info!.image, close: async () => runtime.close?.() }
}

/** `sizeMb` of random bytes in files of at most 1 MiB (a few small ones for a small workspace). */
async function fill(runtime: ContainerRuntime, id: string, sizeMb: number): Promise<void> {
  const files = Math.max(4, sizeMb)
  const each = Math.floor((sizeMb * MiB) / files)
  const entries = Array.from({ length: files }, (_, i) => ({ name: `data/${i}.bin`, content: randomBytes(each) }))
  await runtime.putArchive(id, '/workspace', await packTar([{ name: 'data/', type: 'directory' }, ...entries]))
}

/** One round: a fresh container, session and store, `TASKS` checkpoints, the first of a full workspace. */
async function round(runtime: ContainerRuntime, image: string, sizeMb: number, n: number) {
  const data = mkdtempSync(join(tmpdir(), 'berth-bench-ckpt-'))
  const store = sqliteStore(join(data, 'berth.db'))
  const { id: engineId } = await runtime.create({
    image,
    cmd: ['sleep', 'infinity'],
    workingDir: '/workspace',
    labels: { 'berth.bench': 'checkpoints' },
  })
  try {
    await runtime.start(engineId)
    const blobs = fileBlobs(join(data, 'snapshots'))
    const engine = {
      runtime,
      pool: { list: () => [{ id: 'ctr_bench', engine_id: engineId }] },
    } as unknown as TaskEngine
    const eventLog = new EventLog(store, systemClock)
    const checkpoints = new Checkpoints({ store, blobs, clock: systemClock, logger: silentLogger, engine, eventLog })
    const ws = { id: `ws_bench${n}`, owner_id: OWNER, container_id: 'ctr_bench' } as WorkspaceRecord
    await fill(runtime, engineId, sizeMb)
    const times: number[] = []
    for (let i = 0; i < TASKS; i++) {
      await runtime.putArchive(engineId, '/workspace', await packTar([{ name: 'notes.txt', content: `task ${i}\n` }]))
      const task = {
        id: `task_b${n}x${i}`,
        owner_id: OWNER,
        workspace_id: ws.id,
        mode: 'session',
        started_at: new Date().toISOString(),
      } as TaskRecord
      const t0 = performance.now()
      await checkpoints.keep(task, ws, 'sdk-bench')
      times.push(performance.now() - t0)
    }
    const kept = await checkpoints.list(OWNER, ws.id)
    if (kept.length !== TASKS) throw new Error(`expected ${TASKS} checkpoints, got ${kept.length}`)
    return {
      firstMs: times[0]!,
      laterMs: summarize(times.slice(1)).p50,
      firstAdded: kept[0]!.added_bytes,
      laterAdded: summarize(kept.slice(1).map((c) => c.added_bytes)).p50,
    }
  } finally {
    await runtime.remove(engineId)
    await store.close()
    rmSync(data, { recursive: true, force: true })
  }
}

export async function main(): Promise<Row[]> {
  console.log(
    `\nCheckpoints: ${TASKS} tasks per round, one small file changed per task, ${ROUNDS} rounds (${cpus().length} cores)`,
  )
  const rows: Row[] = []
  for (const name of RUNTIMES) {
    const c = runtimeFor(name)
    try {
      for (const sizeMb of SIZES_MB) {
        const loadBefore = loadavg()[0]!
        const cpu0 = machineCpu()
        const rounds = []
        for (let n = 0; n < ROUNDS; n++) rounds.push(await round(c.runtime, c.image, sizeMb, n))
        const median = (xs: number[]) => summarize(xs).p50
        rows.push({
          runtime: name,
          sizeMb,
          firstMs: median(rounds.map((r) => r.firstMs)),
          firstMsRounds: rounds.map((r) => r.firstMs),
          laterMs: median(rounds.map((r) => r.laterMs)),
          laterMsRounds: rounds.map((r) => r.laterMs),
          firstAddedBytes: median(rounds.map((r) => r.firstAdded)),
          laterAddedBytes: median(rounds.map((r) => r.laterAdded)),
          busyCores: busyCores(cpu0, machineCpu()),
          loadBefore,
        })
      }
    } finally {
      await c.close()
    }
  }
  const spread = (xs: number[]) => `${ms(Math.min(...xs))}–${ms(Math.max(...xs))}`
  const kib = (n: number) => (n / 1024).toFixed(1)
  console.log(
    table(
      ['runtime', 'MB', 'first ms', 'spread', 'later ms', 'spread', 'first KiB', 'later KiB', 'busy cores', 'load'],
      rows.map((r) => [
        r.runtime,
        String(r.sizeMb),
        ms(r.firstMs),
        spread(r.firstMsRounds),
        ms(r.laterMs),
        spread(r.laterMsRounds),
        kib(r.firstAddedBytes),
        kib(r.laterAddedBytes),
        r.busyCores.toFixed(2),
        r.loadBefore.toFixed(2),
      ]),
    ),
  )
  writeResults('checkpoints', { tasks: TASKS, rounds: ROUNDS, rows })
  return rows
}

runAsScript(import.meta.url, main)
