/**
 * The first-token part of bench/gvisor.ts: the standalone server as `pnpm start` runs it
 * (bench/lib/standalone.ts), once with `BERTH_ISOLATION=container` and once with `gvisor`,
 * on each engine, the offline stub model. Per server: the first task of BENCH_GVISOR_COLD
 * fresh profiles (cold), then BENCH_GVISOR_TASKS sequential tasks of one profile (warm),
 * submit → first `token` over the WebSocket as bench/ttft.ts times it, and the CPU per warm
 * task split between Berth, the engine and the agent (where gVisor's own kernel counts).
 */
import { loadavg } from 'node:os'
import { connectEngine } from '@berth/adapter-docker'
import type { Isolation } from '@berth/core'
import type { EngineInfo } from '@berth/testkit'
import { apiCaller } from './api.js'
import { watchCpu } from './cpu-split.js'
import { startStandalone } from './standalone.js'
import { ms, table } from './table.js'
import { connectWsCaller } from './ws-caller.js'

const COLD = Number(process.env.BENCH_GVISOR_COLD ?? 3)
const TASKS = Number(process.env.BENCH_GVISOR_TASKS ?? 10)
const PROMPT = '[[berth:text ok]]'

/** One server's figures (ms). */
export interface TtftRow {
  engine: string
  isolation: Isolation
  cold: number[]
  warmP50: number
  warmMax: number
  /** CPU per warm task: Berth, engine, agent. */
  cpuPerTask: { berth: number; engine: number; agent: number }
  load: { start: number; end: number }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
}

async function oneServer(info: EngineInfo, isolation: Isolation): Promise<TtftRow> {
  const start = loadavg()[0]!
  const server = await startStandalone({
    engine: info.engine,
    socketPath: info.socketPath,
    image: info.image,
    env: { BERTH_ISOLATION: isolation, BERTH_RATE_RPM: '1000000', BERTH_RATE_BURST: '100000' },
  })
  try {
    const call = apiCaller(server.url)
    const user = await call<{ key: { token: string } }>('POST', '/admin/users', server.adminToken, { name: 'bench' })
    const token = user.key.token
    const key = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'offline', provider: 'stub' })
    const caller = await connectWsCaller(server.url, token)
    const firstToken = async (profileId: string) => {
      const t = await caller.run({ mode: 'batch', profile_id: profileId, prompt: PROMPT })
      if (t.status !== 'completed' || t.token === undefined)
        throw new Error(`task ${t.id} ended ${t.status} without a token: ${JSON.stringify(t.error)}`)
      return t.token - t.sent
    }
    const profiles: string[] = []
    const cold: number[] = []
    for (let i = 0; i < Math.max(1, COLD); i++) {
      const p = await call<{ id: string }>('POST', '/v1/profiles', token, {
        name: `gVisor ${i}`,
        slug: `gvisor-${i}`,
        api_key_id: key.id,
      })
      profiles.push(p.id)
      cold.push(await firstToken(p.id))
    }
    const { docker } = connectEngine({ socketPath: info.socketPath })
    const watch = await watchCpu({ serverPid: server.child.pid!, engine: info.engine, docker, pool: server.pool })
    const warm: number[] = []
    for (let i = 0; i < TASKS; i++) warm.push(await firstToken(profiles[0]!))
    const cpu = await watch.stop()
    caller.close()
    const per = (x: number) => x / Math.max(1, TASKS)
    return {
      engine: info.engine,
      isolation,
      cold,
      warmP50: median(warm),
      warmMax: Math.max(...warm),
      cpuPerTask: { berth: per(cpu.berthMs), engine: per(cpu.engineMs), agent: per(cpu.agentMs) },
      load: { start, end: loadavg()[0]! },
    }
  } catch (err) {
    console.error(server.output().split('\n').slice(-30).join('\n'))
    throw err
  } finally {
    await server.stop()
  }
}

/**
 * First token under runc and gVisor on every engine given; prints a table with the load.
 *
 * @example
 * ```ts
 * const rows = await gvisorFirstToken(ensureEngines(['docker', 'podman']))
 * ```
 */
export async function gvisorFirstToken(engines: EngineInfo[]): Promise<TtftRow[]> {
  const rows: TtftRow[] = []
  for (const info of engines)
    for (const isolation of ['container', 'gvisor'] as const) rows.push(await oneServer(info, isolation))
  console.log(
    `\nFirst token, runc vs gVisor (standalone server, stub model; cold: first task of ${COLD} fresh profiles; warm: ${TASKS} sequential tasks; ms; CPU per warm task; load average at start→end)`,
  )
  console.log(
    table(
      ['engine', 'isolation', 'cold', 'warm p50', 'warm max', 'CPU/task berth', 'engine', 'agent', 'load'],
      rows.map((r) => [
        r.engine,
        r.isolation,
        r.cold.map((c) => ms(c)).join(' '),
        ms(r.warmP50),
        ms(r.warmMax),
        ms(r.cpuPerTask.berth),
        ms(r.cpuPerTask.engine),
        ms(r.cpuPerTask.agent),
        `${r.load.start.toFixed(1)}→${r.load.end.toFixed(1)}`,
      ]),
    ),
  )
  return rows
}
