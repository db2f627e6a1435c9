/**
 * Memory admission (issue 29): containers are admitted against the host's memory budget,
 * the sum of their memory caps, not only their own cap. With room for one 2 GiB container,
 * a second task waits in the queue (saying why) and starts only after the first ended;
 * a task whose container could never fit is refused at submit with 400, and nothing of it
 * is stored. On Docker and Podman, with the real runner.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { failure, startServer, type TestServer } from './helpers.js'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

const GIB = 1024 ** 3
const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`

describe.each(['docker', 'podman'] as const)('memory admission on %s', (engine) => {
  const { info, runtime } = engineRuntime(engine)
  const pool = uniquePoolName(`memory-${engine}`)
  let s: TestServer
  beforeAll(async () => {
    // The default environment's containers are capped at 2 GiB: a 3 GiB budget holds one.
    s = await startServer({
      runtime,
      pool: { image: info.image, min: 0, max: 4, name: pool, spec: { network: 'none' }, memoryBudgetBytes: 3 * GIB },
      runner: { bundleDir: RUNNER_BUNDLE },
      concurrency: 10,
    })
    await s.berth.ready
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    await sweep(runtime, pool)
  })

  it('queues the second task, saying why, until the first one ends', async () => {
    const a = await agentUser(s)
    // The first holds the budget until it is cancelled.
    const first = await a.submit({ prompt: `Hold on. ${bash('echo holding; sleep 120')} [[berth:text One.]]` })
    const second = await a.submit({ prompt: 'Then me. [[berth:text Two.]]' })
    // While the first holds the budget, the second waits in the queue for memory.
    let seen = await a.api.tasks.get({ params: { id: second.task_id } })
    for (let i = 0; i < 600 && seen.waiting?.reason !== 'memory'; i++) {
      await new Promise((r) => setTimeout(r, 50))
      seen = await a.api.tasks.get({ params: { id: second.task_id } })
    }
    expect(seen.status).toBe('queued')
    expect(seen.waiting?.message).toContain('memory budget')
    // The first's container is being made or in use (the claim comes before its first move).
    expect(['queued', 'starting', 'running']).toContain(
      (await a.api.tasks.get({ params: { id: first.task_id } })).status,
    )
    expect(s.berth.services.pool.stats().idle).toBe(0)
    // The first ends and gives its container back: the second is admitted and completes.
    expect((await a.api.tasks.cancel({ params: { id: first.task_id } })).status).toBe('cancelled')
    const two = await a.waitDone(second.task_id)
    expect(two.status).toBe('completed')
    expect(two.waiting).toBeNull()
  }, 180_000)

  it('refuses at submit a task whose container could never fit, and stores nothing of it', async () => {
    const a = await agentUser(s)
    const env = await a.api.environments.create({ body: { name: 'big', limits: { memory_mb: 4096 } } })
    const profile = await a.api.profiles.create({
      body: { name: 'Big', slug: 'big', api_key_id: a.keyId, environment_id: env.id },
    })
    const before = await Promise.all([a.api.tasks.list({ query: {} }), a.api.workspaces.list({ query: {} })])
    const refused = await failure(a.submit({ prompt: 'Too big.', profile_id: profile.id }))
    expect(refused.status).toBe(400)
    expect(refused.code).toBe('VALIDATION_FAILED')
    expect(JSON.stringify(refused.details)).toContain('4096 MiB')
    const after = await Promise.all([a.api.tasks.list({ query: {} }), a.api.workspaces.list({ query: {} })])
    expect(after.map((p) => p.total)).toEqual(before.map((p) => p.total))
    // A task of the default environment (2 GiB) still runs.
    expect((await a.run({ prompt: 'Small. [[berth:text Fits.]]' })).status).toBe('completed')
  }, 180_000)
})
