/**
 * Idle sessions yield to waiting work across instances (issue 42): two Berth instances on
 * one Redis (store and coordination), each with its own `local` runtime (bubblewrap), the
 * real runner and the offline model, a profile allowed one running workspace. A session's
 * container stays with the instance that ran it; a task that waits on the other instance
 * for the profile's slot (a submit, or a playbook run in the queue) has it released there,
 * and the released session resumes its conversation on its next follow-up.
 */
import type { Task } from '@berth/client'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { agentUser, startCluster, type Cluster, type Instance } from './cluster.helpers.js'
import { waitForTask } from './helpers.js'
import { LONG_IDLE_MS } from './idle-yield.helpers.js'

describe('idle sessions yield across two instances on one Redis', () => {
  let redis: LocalRedis
  let k: Cluster
  let user: Awaited<ReturnType<typeof agentUser>>
  beforeAll(async () => {
    redis = await startRedis()
    k = await startCluster('redis', {
      redis,
      local: { maxes: [2, 2], sandbox: 'bwrap' },
      berth: { concurrency: 1, sessionIdleMs: LONG_IDLE_MS },
    })
    user = await agentUser(k)
  })
  afterAll(async () => {
    await k?.close()
    await redis?.stop()
  })

  const api = (i: Instance) => i.client(user.token)
  const submit = (i: Instance, body: { prompt: string; mode?: 'batch' | 'session'; session_id?: string }) =>
    api(i).tasks.submit({ body: { mode: 'batch', profile_id: user.profileId, ...body } })
  const done = (i: Instance, id: string) => waitForTask(api(i), id, { timeout: 90_000 })
  const workspace = (id: string) => k.instances[0]!.berth.services.workspaces.records.get(user.id, id)

  it('a task waiting on one instance for the slot an idle session holds on the other gets it; the session resumes later', async () => {
    const [a, b] = k.instances as [Instance, Instance]
    const first = await done(a, (await submit(a, { mode: 'session', prompt: 'The codeword is PLOVER-3.' })).task_id)
    expect(first.status).toBe('completed')
    expect((await workspace(first.workspace_id!)).instance_id).toBe(a.coordination.instanceId)

    // A new session on b: the profile's one slot is held by a's idle session, which yields it.
    const onB = await done(b, (await submit(b, { mode: 'session', prompt: '[[berth:text On b.]]' })).task_id)
    expect(onB.result?.text).toContain('On b.')
    expect((await workspace(onB.workspace_id!)).instance_id).toBe(b.coordination.instanceId)
    expect((await workspace(first.workspace_id!)).status).toBe('idle')

    // A playbook run queued on a, waiting for the slot b's idle session now holds: b releases it.
    const pb = await api(a).playbooks.create({
      body: { profile_id: user.profileId, name: 'Waits', prompt: 'Run when there is room. [[berth:text Ran.]]' },
    })
    await api(a).playbooks.run({ params: { id: pb.id } })
    const ran = await vi.waitFor(async () => {
      const { runs } = await api(a).playbooks.runs({ params: { id: pb.id } })
      const t: Task | null = runs[0]?.task_id ? await api(a).tasks.get({ params: { id: runs[0].task_id } }) : null
      expect(t?.status).toBe('completed')
      return t!
    }, 90_000)
    expect(ran.result?.text).toContain('Ran.')
    expect((await workspace(onB.workspace_id!)).status).toBe('idle')

    // The first session resumes its conversation (once the run's `pb-` session has given the slot back, right after its end).
    const follow = await vi.waitFor(
      () => submit(b, { mode: 'session', session_id: first.session_id!, prompt: 'Say it back. [[berth:recall_all]]' }),
      15_000,
    )
    const resumed = await done(b, follow.task_id)
    expect(resumed.result?.text).toContain('PLOVER-3')
    for (const t of [first, onB]) await api(a).workspaces.delete({ params: { id: t.workspace_id! } })
  }, 300_000)
})
