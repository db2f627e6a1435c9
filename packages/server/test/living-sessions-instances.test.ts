/**
 * A session's living agent across two Berth instances on one Redis (store and
 * coordination), each with its own Docker pool (issue 42): a follow-up submitted to the
 * instance without the container runs in the holder's living agent and reaches its
 * background server; `stop` sent there is relayed to the holder, which releases the
 * container and ends the agent; once the holder is closed (its lease gone), a follow-up on
 * the other instance resumes the conversation there.
 */
import { startRedis, type LocalRedis } from '@berth/testkit'
import type { SubmitTaskInput } from '@berth/client'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { agentUser, startCluster, type Cluster, type Instance } from './cluster.helpers.js'
import {
  expectNewAgent,
  expectSameAgent,
  followUp,
  probes,
  serving,
  startLiving,
  type Caller,
} from './living-sessions.helpers.js'

describe('a living session across two instances on one Redis (docker)', () => {
  let redis: LocalRedis
  let k: Cluster
  let user: Awaited<ReturnType<typeof agentUser>>
  beforeAll(async () => {
    redis = await startRedis()
    k = await startCluster('redis', { redis, leaseMs: 1_000, engine: { name: 'docker', maxes: [2, 2] } })
    user = await agentUser(k)
  })
  afterAll(async () => {
    await k?.close()
    await redis?.stop()
  })

  /** The user as a caller of instance `i`. */
  const caller = (i: Instance): Caller => {
    const api = i.client(user.token)
    return {
      api,
      submit: (body: Partial<SubmitTaskInput> & { prompt: string }) =>
        api.tasks.submit({ body: { mode: 'batch', profile_id: user.profileId, ...body } }),
      events: async (taskId: string) =>
        (await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })).events,
    }
  }
  /** The instance holding the workspace's container, as the shared store says (read through b, which stays up). */
  const holder = async (wsId: string) =>
    (await k.instances[1]!.berth.services.workspaces.records.get(user.id, wsId)).instance_id

  it('follow-ups through the other instance reach the living agent; stop is relayed; after the holder closes, the session resumes', async () => {
    const [a, b] = k.instances as [Instance, Instance]
    const [onA, onB] = [caller(a), caller(b)]
    const l = await startLiving(onA)
    expect(await holder(l.wsId)).toBe(a.coordination.instanceId)

    // Through b: a's agent (same process), a's server.
    await expectSameAgent(onB, l, await followUp(onB, l, `Via b. ${probes(l)} [[berth:text Checked.]]`))
    expect(await holder(l.wsId)).toBe(a.coordination.instanceId)

    // Stopped through b: a releases its container and the agent ends, with its server.
    const stopped = await onB.api.workspaces.stop({ params: { id: l.wsId } })
    expect(stopped).toMatchObject({ status: 'idle', container_id: null, agent: null })
    await vi.waitFor(() => expect(serving(l)).toEqual([]), { timeout: 15_000, interval: 100 })

    // Back on a (a new agent, the conversation resumed), then a closes while it holds the session.
    const again = await followUp(onA, l, `Again on a. ${probes(l)} [[berth:recall_all]]`)
    const pid = await expectNewAgent(onA, l, again)
    expect(await holder(l.wsId)).toBe(a.coordination.instanceId)
    await a.close()
    await vi.waitFor(async () =>
      expect(await b.coordination.instances.alive()).not.toContain(a.coordination.instanceId),
    )

    // The whole conversation, the task a ran last included.
    const resumed = await followUp(onB, l, `Still here? ${probes(l)} [[berth:recall_all]]`)
    expect(await expectNewAgent(onB, { ...l, pid }, resumed)).not.toBe(l.pid)
    expect(resumed.result!.text).toContain('Again on a.')
    expect(await holder(l.wsId)).toBe(b.coordination.instanceId)
    await onB.api.workspaces.delete({ params: { id: l.wsId } })
  }, 600_000)
})
