/**
 * Container runtime benchmark, per engine (Docker, Podman), all in one run:
 * - cold create+start through Berth's adapter vs raw dockerode in the same loop
 *   (interleaved), against two baselines: a plain container (`Image` + `Cmd`, what one
 *   would write by hand) and the very create body Berth sends (so the adapter's own cost
 *   shows apart from the cost of hardening: init, limits, capabilities);
 * - exec round trip (`true`: create, attach, wait, exit code) through Berth vs raw dockerode;
 * - idle memory of a started container (from stats, page cache excluded);
 * - a claim from Berth's warm pool (`ContainerPool`, min 2, refilled between claims) vs a
 *   claim from an empty pool (min 0: create+start on the claim), interleaved.
 * Bounded: BENCH_RUNTIME_ITERATIONS (default 20) per measurement. Targets: Berth's
 * create+start median within 1.15x of the plain raw create+start; a warm claim's median
 * under 5 ms.
 *
 *   node --import tsx bench/runtime.ts        (or via bench/run.ts: export main())
 */
import { runAsScript, writeResults } from './lib/results.js'
import { connectEngine, dockerRuntime, toCreateOptions } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { ContainerPool, IDLE_COMMAND, collectExec, silentLogger, systemClock, type ContainerRuntime } from '@berth/core'
import { memoryStore } from '@berth/server'
import { ensureEngines, waitUntil, type EngineInfo } from '@berth/testkit'
import { ms, table } from './lib/table.js'

const ITERATIONS = Number(process.env.BENCH_RUNTIME_ITERATIONS ?? 20)
const TARGET_RATIO = 1.15
const TARGET_WARM_CLAIM_MS = 5
const LABEL = 'berth.bench'

type DockerClient = ReturnType<typeof connectEngine>['docker']

interface Stat {
  median: number
  p99: number
  n: number
}

interface EngineResult {
  engine: string
  version: string
  createStart: { berth: Stat; rawPlain: Stat; rawSameConfig: Stat; ratioPlain: number; ratioSameConfig: number }
  exec: { berth: Stat; raw: Stat; ratio: number }
  idleMemoryBytes: { berth: number; rawPlain: number }
  verdict: 'PASS' | 'BELOW TARGET'
  pool: PoolResult
}

interface PoolResult {
  /** Claim from a pool with an idle container ready: no engine call. */
  warmClaim: Stat
  /** Claim from a pool with none (min 0): create+start, labels, the record. */
  coldClaim: Stat
  /** Cold median / warm median. */
  speedup: number
  targetMs: number
  verdict: 'PASS' | 'BELOW'
}

function stat(samples: number[]): Stat {
  const s = [...samples].sort((a, b) => a - b)
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? NaN
  const mid = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
  return { median: mid, p99: at(0.99), n: s.length }
}

const now = () => performance.now()

async function rawExec(docker: DockerClient, id: string): Promise<number> {
  const exec = await docker.getContainer(id).exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true })
  const stream = (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream
  await new Promise<void>((resolve) => {
    stream.on('end', resolve).on('close', resolve).on('error', resolve)
    stream.resume()
  })
  return (await exec.inspect()).ExitCode ?? -1
}

/**
 * Warm vs cold claims through `ContainerPool`. Before each warm claim the pool is back at
 * `min` idle (the refill after the previous claim is done), so the claim is what a caller
 * sees in steady state; releases (which reap) are not timed.
 */
async function benchPool(rt: ContainerRuntime, image: string, labels: Record<string, string>): Promise<PoolResult> {
  const common = {
    runtime: rt,
    store: memoryStore(),
    clock: systemClock,
    logger: silentLogger,
    image,
    spec: { labels },
  }
  const warm = new ContainerPool({ ...common, name: `bench-warm-${process.pid}`, min: 2, max: 4 })
  const cold = new ContainerPool({ ...common, store: memoryStore(), name: `bench-cold-${process.pid}`, min: 0, max: 4 })
  try {
    await Promise.all([warm.start(), cold.start()])
    const warmMs: number[] = []
    const coldMs: number[] = []
    for (let i = 0; i < ITERATIONS; i++) {
      await waitUntil(() => warm.stats().idle === 2, { what: 'the pool to settle', interval: 5 })
      let t = now()
      const w = await warm.claim({ owner_id: 'usr_bench', purpose: 'batch' })
      warmMs.push(now() - t)
      await w.release()
      t = now()
      const c = await cold.claim({ owner_id: 'usr_bench', purpose: 'batch' })
      coldMs.push(now() - t)
      await c.release()
    }
    const warmClaim = stat(warmMs)
    const coldClaim = stat(coldMs)
    return {
      warmClaim,
      coldClaim,
      speedup: coldClaim.median / warmClaim.median,
      targetMs: TARGET_WARM_CLAIM_MS,
      verdict: warmClaim.median < TARGET_WARM_CLAIM_MS ? 'PASS' : 'BELOW',
    }
  } finally {
    await Promise.all([warm.close({ removeAll: true }), cold.close({ removeAll: true })])
  }
}

async function settleMemory(read: () => Promise<number>): Promise<number> {
  await new Promise((r) => setTimeout(r, 1000))
  return read()
}

async function benchEngine(name: 'docker' | 'podman', info: EngineInfo): Promise<EngineResult> {
  const rt: ContainerRuntime =
    name === 'docker' ? dockerRuntime({ socketPath: info.socketPath }) : podmanRuntime({ socketPath: info.socketPath })
  const { docker } = connectEngine({ socketPath: info.socketPath })
  const labels = { [LABEL]: String(process.pid) }
  const created: string[] = []
  const cleanup = async () => {
    await Promise.all(
      created.splice(0).map((id) =>
        docker
          .getContainer(id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    )
  }

  try {
    // Warm-up: one of each, not recorded (first create loads the image layers, the network).
    for (const id of [
      (await rt.create({ image: info.image, cmd: [...IDLE_COMMAND], labels })).id,
      (await docker.createContainer({ Image: info.image, Cmd: [...IDLE_COMMAND], Labels: labels })).id,
    ]) {
      created.push(id)
      await docker.getContainer(id).start()
    }
    await cleanup()

    const berth: number[] = []
    const rawPlain: number[] = []
    const rawSame: number[] = []
    const runs: Record<string, () => Promise<void>> = {
      berth: async () => {
        const t = now()
        const { id } = await rt.create({ image: info.image, cmd: [...IDLE_COMMAND], labels })
        await rt.start(id)
        berth.push(now() - t)
        created.push(id)
      },
      rawPlain: async () => {
        const t = now()
        const c = await docker.createContainer({ Image: info.image, Cmd: [...IDLE_COMMAND], Labels: labels })
        await c.start()
        rawPlain.push(now() - t)
        created.push(c.id)
      },
      rawSame: async () => {
        const body = toCreateOptions(
          { image: info.image, cmd: [...IDLE_COMMAND], labels },
          `berth-raw-${Math.random().toString(16).slice(2, 14)}`,
        )
        const t = now()
        const c = await docker.createContainer(body)
        await c.start()
        rawSame.push(now() - t)
        created.push(c.id)
      },
    }
    const order = Object.keys(runs)
    for (let i = 0; i < ITERATIONS; i++) {
      // Rotate the order each round so no variant always runs first.
      for (let k = 0; k < order.length; k++) await runs[order[(i + k) % order.length]!]!()
      if (created.length >= 30) await cleanup()
    }
    await cleanup()

    // Exec and idle memory on one container each.
    const { id: bid } = await rt.create({ image: info.image, cmd: [...IDLE_COMMAND], labels })
    await rt.start(bid)
    created.push(bid)
    const plain = await docker.createContainer({ Image: info.image, Cmd: [...IDLE_COMMAND], Labels: labels })
    await plain.start()
    created.push(plain.id)
    const execBerth: number[] = []
    const execRaw: number[] = []
    for (let i = 0; i < ITERATIONS; i++) {
      let t = now()
      const r = await collectExec(await rt.exec(bid, { cmd: ['true'] }))
      execBerth.push(now() - t)
      if (r.exitCode !== 0) throw new Error(`berth exec exited ${r.exitCode}`)
      t = now()
      const code = await rawExec(docker, plain.id)
      execRaw.push(now() - t)
      if (code !== 0) throw new Error(`raw exec exited ${code}`)
    }
    const memBerth = await settleMemory(async () => (await rt.stats(bid)).memoryBytes)
    const memPlain = await settleMemory(async () => (await dockerRuntime({ docker }).stats(plain.id)).memoryBytes)

    await cleanup()
    const pool = await benchPool(rt, info.image, labels)

    const cs = { berth: stat(berth), rawPlain: stat(rawPlain), rawSameConfig: stat(rawSame) }
    const ex = { berth: stat(execBerth), raw: stat(execRaw) }
    const ratioPlain = cs.berth.median / cs.rawPlain.median
    return {
      engine: name,
      version: info.version,
      createStart: { ...cs, ratioPlain, ratioSameConfig: cs.berth.median / cs.rawSameConfig.median },
      exec: { ...ex, ratio: ex.berth.median / ex.raw.median },
      idleMemoryBytes: { berth: memBerth, rawPlain: memPlain },
      verdict: ratioPlain <= TARGET_RATIO ? 'PASS' : 'BELOW TARGET',
      pool,
    }
  } finally {
    await cleanup()
    const leftovers = await docker.listContainers({ all: true, filters: { label: [`${LABEL}=${process.pid}`] } })
    await Promise.all(
      leftovers.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    )
  }
}

/** Run the runtime benchmark for Docker and Podman (provisioning them if needed) and print the table. */
export async function main(): Promise<EngineResult[]> {
  const engines = ensureEngines(['docker', 'podman'])
  const results: EngineResult[] = []
  for (const info of engines) {
    console.log(`\nRuntime benchmark: ${info.engine} ${info.version}, ${ITERATIONS} iterations per measurement…`)
    results.push(await benchEngine(info.engine, info))
  }
  const mib = (b: number) => (b / 1024 / 1024).toFixed(2)
  const x = (r: number) => `${r.toFixed(2)}x`
  console.log('\nCold create+start (ms)')
  console.log(
    table(
      [
        'engine',
        'Berth median',
        'Berth p99',
        'raw plain median',
        'raw plain p99',
        'raw same-config median',
        'vs plain',
        'vs same-config',
        'target',
        'verdict',
      ],
      results.map((r) => [
        r.engine,
        ms(r.createStart.berth.median),
        ms(r.createStart.berth.p99),
        ms(r.createStart.rawPlain.median),
        ms(r.createStart.rawPlain.p99),
        ms(r.createStart.rawSameConfig.median),
        x(r.createStart.ratioPlain),
        x(r.createStart.ratioSameConfig),
        `<= ${TARGET_RATIO}x`,
        r.verdict,
      ]),
    ),
  )
  console.log('\nExec `true` round trip (ms), and idle memory (MiB)')
  console.log(
    table(
      [
        'engine',
        'Berth exec median',
        'Berth exec p99',
        'raw exec median',
        'raw exec p99',
        'exec ratio',
        'idle mem Berth',
        'idle mem plain',
      ],
      results.map((r) => [
        r.engine,
        ms(r.exec.berth.median),
        ms(r.exec.berth.p99),
        ms(r.exec.raw.median),
        ms(r.exec.raw.p99),
        x(r.exec.ratio),
        mib(r.idleMemoryBytes.berth),
        mib(r.idleMemoryBytes.rawPlain),
      ]),
    ),
  )
  console.log('\nPool claim (ms): warm (an idle container ready) vs cold (create+start on the claim)')
  console.log(
    table(
      ['engine', 'warm p50', 'warm p99', 'cold p50', 'cold p99', 'speedup', 'target', 'verdict'],
      results.map((r) => [
        r.engine,
        ms(r.pool.warmClaim.median),
        ms(r.pool.warmClaim.p99),
        ms(r.pool.coldClaim.median),
        ms(r.pool.coldClaim.p99),
        x(r.pool.speedup),
        `< ${r.pool.targetMs} ms`,
        r.pool.verdict,
      ]),
    ),
  )
  writeResults('runtime', { iterations: ITERATIONS, results })
  return results
}

runAsScript(import.meta.url, main)
