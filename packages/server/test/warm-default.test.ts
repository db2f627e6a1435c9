/**
 * The warm path without configuration (issue 32): a server built from the SETTINGS table
 * with no pool or warm-agent setting hands a profile's second and later tasks to an agent
 * that is already up; a parked agent no task takes gives its container back after
 * `BERTH_WARM_IDLE_S`; `BERTH_WARM_AGENTS=0` turns it off. A parked agent holds neither the
 * model key nor a brokered secret, and no agent is parked for a profile with an
 * `env`-delivered secret (it would hold the value).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { PooledContainer } from '@berth/core'
import { berthFromConfig, configFromEnv, type ConfiguredBerth } from '@berth/server'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { forms, searchContainer } from './broker-search.helpers.js'
import { clientFor, waitForTask } from './helpers.js'
import { ENGINES, engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'

const ADMIN = 'warm-default-admin-token-0123456789'
const MODEL_KEY = 'sk-ant-api03-WARMKEY-4f8g2h6j9k1l3z5x'
const BROKERED = 'brokered-value-Wm37Pq90Rt64Yd12'
const PROMPT = 'Say it. [[berth:text ok]]'

/** A Berth from the SETTINGS table on `engine`, over HTTP, counting the runner's starts (cold `main.js`, warm `main.js --warm`). */
async function start(engine: (typeof ENGINES)[number], settings: Record<string, string> = {}) {
  const { info } = engineRuntime(engine)
  const dir = mkdtempSync(join(tmpdir(), 'berth-warm-default-'))
  const pool = uniquePoolName(`warm-default-${engine}`)
  const configured: ConfiguredBerth = await berthFromConfig(
    configFromEnv({
      BERTH_DATA_DIR: dir,
      BERTH_STORAGE: 'memory',
      BERTH_RUNTIME: engine,
      BERTH_ENGINE_URL: `unix://${info.socketPath}`,
      BERTH_IMAGE: info.image,
      BERTH_POOL_NAME: pool,
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_RATE_RPM: '100000',
      BERTH_RATE_BURST: '10000',
      BERTH_METRICS: 'off',
      // The fake model provider listens on loopback.
      BERTH_ALLOW_PRIVATE_WEBHOOKS: 'true',
      ...settings,
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
  await berth.ready
  const server: Server = createServer(berth.handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const res = await fetch(`${url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'warm', role: 'user' }),
  })
  const api = clientFor({ url }, ((await res.json()) as { key: { token: string } }).key.token)
  const stub = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: { name: 'Agent', slug: 'agent', api_key_id: stub.id, default_tools: ['Bash'] },
  })
  const run = async (profileId = profile.id) => {
    const { task_id } = await api.tasks.submit({ body: { mode: 'batch', profile_id: profileId, prompt: PROMPT } })
    const task = await waitForTask(api, task_id, { timeout: 120_000 })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    return task
  }
  /** Containers holding a parked agent: in use, serving no workspace. */
  const parked = () =>
    (berth.pool!.list() as PooledContainer[]).filter((c) => c.state === 'in_use' && c.workspace_id === null)
  /** Until `n` agents are parked (and with `ready`, Claude Code up in each). */
  const waitParked = (n: number, ready = true) =>
    vi.waitFor(
      () => {
        const p = parked()
        if (p.length < n || (ready && (berth.warmAgents?.stats().ready ?? 0) < n))
          throw new Error(`parked: ${p.length}`)
        return p
      },
      { timeout: 120_000, interval: 100 },
    )
  const close = async () => {
    server.closeAllConnections()
    await new Promise<void>((r) => server.close(() => r()))
    await berth.close({ removeContainers: true })
    expect(await sweep(runtime, pool)).toBe(0)
    await runtime.close?.()
    rmSync(dir, { recursive: true, force: true })
  }
  return { configured, berth, runtime, pool, api, profile, runs, run, parked, waitParked, close }
}

describe.each(ENGINES)('the warm path by default on %s', (engine) => {
  describe('with no pool or warm setting', () => {
    let s: Awaited<ReturnType<typeof start>>
    let upstream: OfflineModelServer
    beforeAll(async () => {
      upstream = await startOfflineModel({ apiKey: MODEL_KEY })
      s = await start(engine)
    }, 180_000)
    afterAll(async () => {
      await s?.close()
      await upstream?.close()
    })

    it('keeps containers and agents warm, and a profile’s second and later tasks hand their prompt to a started agent', async () => {
      expect(s.berth.pool!.stats().min).toBeGreaterThanOrEqual(1)
      expect(s.berth.warmAgents).toBeDefined()
      await s.run()
      expect(s.runs.cold).toBe(1)
      for (let i = 0; i < 3; i++) {
        await s.waitParked(1)
        await s.run()
      }
      // Only the first task started its runner; each task started one agent for the next.
      expect(s.runs).toEqual({ cold: 1, warm: 4 })
    }, 300_000)

    it('serves tasks submitted back to back warm too: a task’s refill starts by its first token, and the next task waits for it', async () => {
      const { cold, warm } = s.runs
      for (let i = 0; i < 3; i++) await s.run()
      // No runner started cold; each task started at least one agent for the next.
      expect(s.runs.cold).toBe(cold)
      expect(s.runs.warm).toBeGreaterThanOrEqual(warm + 3)
    }, 300_000)

    it('parks an agent that holds neither the model key nor a brokered secret, and none for an env-delivered secret', async () => {
      const key = await s.api.apiKeys.create({
        body: {
          name: 'prod',
          provider: 'anthropic',
          key: MODEL_KEY,
          base_url: upstream.url,
          allowed_models: ['claude-sonnet-*'],
        },
      })
      const profile = await s.api.profiles.create({
        body: { name: 'Real', slug: 'real', api_key_id: key.id, default_tools: ['Bash'], model: 'claude-sonnet-4-5' },
      })
      await s.api.secrets.create({
        body: {
          name: 'API_TOKEN',
          value: BROKERED,
          delivery: 'brokered',
          hosts: ['api.example.test'],
          profile_ids: [profile.id],
        },
      })
      // The earlier tests' last refills (one or two agents of the default profile) park first.
      await vi.waitFor(
        () => {
          if (s.berth.warmAgents!.stats().starting > 0) throw new Error('agents still starting')
        },
        { timeout: 120_000, interval: 100 },
      )
      const before = new Set(s.parked().map((c) => c.id))
      await s.run(profile.id)
      const [agent] = await vi.waitFor(
        () => {
          const fresh = s.parked().filter((c) => !before.has(c.id))
          if (fresh.length !== 1) throw new Error(`new parked agents: ${fresh.length}`)
          return fresh
        },
        { timeout: 120_000, interval: 100 },
      )
      // Claude Code is up in it before the search (its memory then holds whatever it was given).
      await s.waitParked(before.size + 1)
      const needles = [
        ...forms(MODEL_KEY).map((form) => ({ name: 'model key', form })),
        ...forms(BROKERED).map((form) => ({ name: 'brokered secret', form })),
      ]
      const skip = ['/proc', '/sys', '/dev']
      const asRoot = await searchContainer(s.runtime, agent!.engine_id, 'root', { needles, skip, files: true })
      const memory = await searchContainer(s.runtime, agent!.engine_id, '1000:1000', {
        needles,
        skip,
        files: false,
        memory: true,
      })
      expect(asRoot.files).toBeGreaterThan(10)
      expect(memory.regions).toBeGreaterThan(0)
      expect([...asRoot.found, ...memory.found]).toEqual([])

      // An env secret would sit in a parked agent's environment: that profile's tasks run cold and park nothing.
      await s.api.secrets.create({ body: { name: 'PLAIN', value: 'env-secret-value-Jk41', profile_ids: [profile.id] } })
      const { warm, cold } = s.runs
      await s.run(profile.id)
      expect(s.runs.cold).toBe(cold + 1)
      expect(s.runs.warm).toBe(warm)
      expect(s.berth.warmAgents!.stats().starting).toBe(0)
    }, 300_000)
  })

  it('reclaims a parked agent no task takes after BERTH_WARM_IDLE_S', async () => {
    const s = await start(engine, { BERTH_WARM_IDLE_S: '3' })
    try {
      // The agent for the next task parks while this one runs (and may idle out before it ends).
      const { task_id } = await s.api.tasks.submit({
        body: { mode: 'batch', profile_id: s.profile.id, prompt: PROMPT },
      })
      const [agent] = await s.waitParked(1, false)
      expect((await waitForTask(s.api, task_id, { timeout: 120_000 })).status).toBe('completed')
      await vi.waitFor(
        async () => {
          const left = await s.runtime.list({ labels: { 'berth.pool': s.pool }, all: true })
          if (left.some((c) => c.id === agent!.engine_id)) throw new Error('the parked agent is still there')
        },
        { timeout: 60_000, interval: 200 },
      )
      expect(s.parked()).toEqual([])
      expect(s.berth.warmAgents!.stats().parked).toBe(0)
    } finally {
      await s.close()
    }
  }, 300_000)

  it('BERTH_WARM_AGENTS=0 turns warm agents off: every task starts its runner', async () => {
    const s = await start(engine, { BERTH_WARM_AGENTS: '0' })
    try {
      expect(s.berth.warmAgents).toBeUndefined()
      await s.run()
      await s.run()
      expect(s.runs).toEqual({ cold: 2, warm: 0 })
    } finally {
      await s.close()
    }
  }, 300_000)
})
