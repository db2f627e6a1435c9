/**
 * `node --import tsx bench/gvisor.ts` (also run by `pnpm bench`): what gVisor costs against
 * runc on Docker and Podman, through Berth's runtimes: container create+start, an exec of
 * `true`, and a CPU-bound tool (a shell loop of ~1 s under runc). Three runs each; the
 * load average is printed beside every run (figures on a shared machine are noisy: compare
 * the two columns of one run, and re-measure on a quiet machine). Then a task's first token
 * and CPU per task through the standalone server under each isolation
 * (bench/lib/gvisor-ttft.ts; BENCH_GVISOR_COLD, BENCH_GVISOR_TASKS).
 */
import { loadavg } from 'node:os'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { IDLE_COMMAND, collectExec, type ContainerRuntime, type Isolation } from '@berth/core'
import { ensureEngines } from '@berth/testkit'
import { gvisorFirstToken } from './lib/gvisor-ttft.js'
import { runAsScript, writeResults } from './lib/results.js'
import { ms, table } from './lib/table.js'

const RUNS = 3
/** About a second of one core under runc on the reference machine. */
const LOOP = 'i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done'

interface Row {
  engine: string
  isolation: Isolation
  run: number
  startMs: number
  execMs: number
  loopMs: number
  load1: number
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now()
  const value = await f()
  return [value, performance.now() - t0]
}

async function once(
  rt: ContainerRuntime,
  image: string,
  isolation: Isolation,
): Promise<Omit<Row, 'engine' | 'run' | 'isolation'>> {
  const load1 = loadavg()[0]!
  const [id, startMs] = await timed(async () => {
    const { id } = await rt.create({
      image,
      cmd: [...IDLE_COMMAND],
      workingDir: '/workspace',
      isolation,
      labels: { 'berth.bench': 'gvisor' },
    })
    await rt.start(id)
    return id
  })
  try {
    const [, execMs] = await timed(async () => collectExec(await rt.exec(id, { cmd: ['true'] })))
    const [loop, loopMs] = await timed(async () => collectExec(await rt.exec(id, { cmd: ['sh', '-c', LOOP] })))
    if (loop.exitCode !== 0) throw new Error(`the loop exited ${loop.exitCode}: ${loop.stderr}`)
    return { startMs, execMs, loopMs, load1 }
  } finally {
    await rt.remove(id)
  }
}

/** Every engine, both isolation levels, {@link RUNS} runs each; prints a table and writes the results. */
export async function main(): Promise<Row[]> {
  const rows: Row[] = []
  const engines = ensureEngines(['docker', 'podman'])
  for (const info of engines) {
    const rt =
      info.engine === 'docker'
        ? dockerRuntime({ socketPath: info.socketPath })
        : podmanRuntime({ socketPath: info.socketPath })
    if (!(await rt.isolations?.())?.includes('gvisor'))
      throw new Error(`${info.engine} has no gVisor: run scripts/gvisor/ensure.sh`)
    for (const isolation of ['container', 'gvisor'] as const)
      for (let run = 1; run <= RUNS; run++)
        rows.push({ engine: info.engine, isolation, run, ...(await once(rt, info.image, isolation)) })
  }
  console.log(`\ngVisor vs runc (${RUNS} runs each; wall-clock ms, load average at the start of each run)`)
  console.log(
    table(
      ['engine', 'isolation', 'run', 'create+start', 'exec true', 'CPU-bound loop', 'load1'],
      rows.map((r) => [
        r.engine,
        r.isolation,
        String(r.run),
        ms(r.startMs),
        ms(r.execMs),
        ms(r.loopMs),
        r.load1.toFixed(2),
      ]),
    ),
  )
  const firstToken = await gvisorFirstToken(engines)
  writeResults('gvisor', { runs: RUNS, rows, firstToken })
  return rows
}

runAsScript(import.meta.url, main)
