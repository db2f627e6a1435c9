/**
 * Which path tasks take in the default configuration (issue 32): a server from the
 * SETTINGS table with no pool or warm-agent setting, on the test engines, runs 20
 * sequential tasks of one profile, then 3 bursts of 4 submitted at once, and counts the
 * tasks whose runner started cold (`main.js`) against those handed to a warm agent; then
 * the memory a parked agent's container uses (`docker stats --no-stream` on Docker, the
 * engine's stats on Podman), three samples. Prints the load average beside every figure.
 *
 *   node --import ./examples/standalone-server/node_modules/tsx/dist/loader.mjs scripts/warm-path.ts [docker|podman]
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createBerthClient } from '@berth/client'
import { berthFromConfig, configFromEnv } from '@berth/server'
import { readEngine } from '@berth/testkit'

const engine = (process.argv[2] ?? 'docker') as 'docker' | 'podman'
const ADMIN = 'warm-path-admin-token-0123456789'
const load = () =>
  `load ${loadavg()
    .map((n) => n.toFixed(2))
    .join(' ')}`
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const info = readEngine(engine)
const dir = mkdtempSync(join(tmpdir(), 'berth-warm-path-'))
const configured = await berthFromConfig(
  configFromEnv({
    BERTH_DATA_DIR: dir,
    BERTH_STORAGE: 'memory',
    BERTH_RUNTIME: engine,
    BERTH_ENGINE_URL: `unix://${info.socketPath}`,
    BERTH_IMAGE: info.image,
    BERTH_POOL_NAME: `warm-path-${process.pid}`,
    BERTH_ADMIN_TOKEN: ADMIN,
    BERTH_RATE_RPM: '100000',
    BERTH_RATE_BURST: '10000',
    BERTH_METRICS: 'off',
  }),
  { warn: () => {} },
)
const { berth } = configured
const runtime = configured.runtime.runtime
const runs = { cold: 0, warm: 0 }
const exec = runtime.exec.bind(runtime)
runtime.exec = (id, opts) => {
  if (opts.cmd.some((part) => part.endsWith('/berth-runner/main.js')))
    runs[opts.cmd.includes('--warm') ? 'warm' : 'cold']++
  return exec(id, opts)
}
// The request log goes to stdout: keep this script's figures readable.
const write = process.stdout.write.bind(process.stdout)
process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) =>
  String(chunk).startsWith('{"level"') ? true : write(chunk, ...rest)) as typeof process.stdout.write

try {
  await berth.ready
  const server = createServer(berth.handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const res = await fetch(`${url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'warm-path', role: 'user' }),
  })
  const token = ((await res.json()) as { key: { token: string } }).key.token
  const api = createBerthClient({ baseURL: url, token })
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({ body: { name: 'Agent', slug: 'agent', api_key_id: key.id } })
  const one = async () => {
    const { task_id } = await api.tasks.submit({
      body: { mode: 'batch', profile_id: profile.id, prompt: '[[berth:text ok]]' },
    })
    for (;;) {
      const t = await api.tasks.get({ params: { id: task_id } })
      if (t.status === 'completed') return
      if (t.status === 'failed' || t.status === 'cancelled') throw new Error(`task ${task_id} ${t.status}`)
      await sleep(50)
    }
  }
  const coldOf = async (n: number, fn: () => Promise<unknown>) => {
    const before = runs.cold
    await fn()
    const cold = runs.cold - before
    return { warm: n - cold, cold }
  }
  await one() // the profile's first task: cold by design
  const sequential = await coldOf(20, async () => {
    for (let i = 0; i < 20; i++) await one()
  })
  console.log(
    `${engine}: 20 sequential tasks after the first: ${sequential.warm} warm, ${sequential.cold} cold (${load()})`,
  )
  for (let b = 1; b <= 3; b++) {
    const burst = await coldOf(4, () => Promise.all([one(), one(), one(), one()]))
    console.log(`${engine}: burst ${b} of 4: ${burst.warm} warm, ${burst.cold} cold (${load()})`)
  }
  // A parked agent's memory: Node, the runner and Claude Code waiting for a prompt.
  await sleep(5000)
  const parked = berth.pool!.list().filter((c) => c.state === 'in_use' && c.workspace_id === null)
  const agent = parked[0]
  if (!agent) throw new Error('no parked agent to measure')
  for (let i = 0; i < 3; i++) {
    const usage =
      engine === 'docker'
        ? execFileSync(
            'docker',
            ['-H', `unix://${info.socketPath}`, 'stats', '--no-stream', '--format', '{{.MemUsage}}', agent.engine_id],
            {
              encoding: 'utf8',
            },
          ).trim()
        : `${((await runtime.stats(agent.engine_id)).memoryBytes / 1024 ** 2).toFixed(1)}MiB`
    console.log(`${engine}: parked agent memory, sample ${i + 1}: ${usage} (${parked.length} parked; ${load()})`)
    await sleep(2000)
  }
  server.closeAllConnections()
  server.close()
} finally {
  await berth.close({ removeContainers: true })
  await runtime.close?.()
  rmSync(dir, { recursive: true, force: true })
}
