/**
 * Steering across instances (issue 26): two instances on one Redis (store and
 * coordination), each on its own `local` runtime (bubblewrap). A has no room, so B runs
 * every task; the caller talks to A only: its decisions, interrupt and message reach the
 * agent on B over the coordination port.
 */
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCluster, type Cluster } from './cluster.helpers.js'
import type { TestServer } from './helpers.js'
import { httpDecide, interruptFlow, markerFlow, messageFlow } from './steering.helpers.js'
import { agentUser } from './tasks.helpers.js'

describe('steering over two instances on one Redis', () => {
  let redis: LocalRedis
  let c: Cluster
  let a: Awaited<ReturnType<typeof agentUser>>
  let other: Awaited<ReturnType<typeof agentUser>>
  beforeAll(async () => {
    redis = await startRedis()
    c = await startCluster('redis', { redis, leaseMs: 1_000, local: { maxes: [0, 2], sandbox: 'bwrap' } })
    // The caller's client talks to instance A; users are made through the admin API.
    const onA = { url: c.instances[0]!.url, user: (name?: string) => c.user(name) } as unknown as TestServer
    a = await agentUser(onA, { waitMs: 90_000 })
    other = await agentUser(onA)
  })
  afterAll(async () => {
    await c?.close()
    await redis?.stop()
  })

  /** The instance a task ran on, as stored. */
  const ranOn = async (taskId: string) =>
    (await c.instances[1]!.berth.services.tasks.records.get(a.id, taskId)).instance_id

  it('a decision sent to A reaches the agent running on B', async () => {
    const task = await markerFlow(a, other, httpDecide(a))
    expect(await ranOn(task.task_id)).toBe(c.instances[1]!.coordination.instanceId)
  })

  it('an interrupt sent to A stops the turn on B; the follow-up recalls the prompt', async () => {
    await interruptFlow(a)
  })

  it('a message sent to A reaches the agent on B', async () => {
    await messageFlow(a)
  })
})
