/**
 * Tasks over several Berth instances (issue 11): in-process instances on the `local`
 * runtime (bubblewrap) sharing one store and one coordination backend, with the offline
 * model. One limit over all, work taken where there is room, follow-ups routed to the
 * instance holding the session's container, live events across instances, a dead
 * instance's tasks taken over.
 */
import type { SocketServerMessage } from '@berth/client'
import type { Task, TaskBusMessage } from '@berth/core'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import WebSocket from 'ws'
import { ADMIN_TOKEN, agentUser, startCluster, type Backend, type Instance } from './cluster.helpers.js'
import { failure, waitForTask } from './helpers.js'

/** A prompt whose agent takes `turns` slow turns (about a second each), then answers. */
const slowPrompt = (turns: number, text = 'Done slowly.') =>
  `Take your time. [[berth:slow 1000]] [[berth:turns ${turns}]] [[berth:text ${text}]]`

let redis: LocalRedis | undefined

describe('tasks over several instances (memory coordination)', () => clusterCases('memory'))

describe('tasks over several instances (redis store and coordination)', () => {
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  clusterCases('redis')
})

/** One cluster on the `local` runtime (`maxes[i]`: instance i's pool max) and its agent user. */
async function cluster(backend: Backend, maxes: number[]) {
  const c = await startCluster(backend, {
    redis,
    leaseMs: 1_000,
    local: { maxes, sandbox: 'bwrap' },
    berth: { recoveryGraceMs: 300 },
  })
  try {
    const user = await agentUser(c)
    const api = (inst: Instance) => inst.client(user.token)
    const submit = (inst: Instance, body: { prompt: string; mode?: 'batch' | 'session'; session_id?: string }) =>
      api(inst).tasks.submit({ body: { mode: 'batch', profile_id: user.profileId, ...body } })
    const waitStatus = (inst: Instance, taskId: string, status: Task['status']) =>
      waitForTask(api(inst), taskId, { until: (t) => t.status === status })
    const waitDone = (inst: Instance, taskId: string) => waitForTask(api(inst), taskId)
    return { ...c, ...user, ownerId: user.id, api, submit, waitStatus, waitDone }
  } catch (err) {
    await c.close()
    throw err
  }
}

function clusterCases(backend: Backend): void {
  let c: Awaited<ReturnType<typeof cluster>> | undefined
  afterEach(async () => {
    await c?.close()
    c = undefined
  })

  it('20 parallel submits over 3 instances admit exactly the profile’s 5', async () => {
    const k = await cluster(backend, [4, 4, 4])
    c = k
    const answers = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => k.submit(k.instances[i % 3]!, { prompt: slowPrompt(30) })),
    )
    const admitted = answers.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []))
    const refused = await Promise.all(
      answers.flatMap((a) => (a.status === 'rejected' ? [failure(Promise.reject(a.reason))] : [])),
    )
    expect(admitted).toHaveLength(5)
    expect(refused).toHaveLength(15)
    for (const r of refused) {
      expect(r.status).toBe(429)
      expect(r.body).toMatchObject({ code: 'CONCURRENCY_LIMIT', details: { limit: 5, running: 5 } })
      // When the first admitted task ends at the latest (its default hour and the grace); 10 s while none has started.
      const retryAfter = r.details!.retry_after as number
      expect(r.headers?.get('retry-after')).toBe(String(retryAfter))
      expect(retryAfter === 10 || (retryAfter > 3_500 && retryAfter <= 3_615)).toBe(true)
    }
    // The admitted ones hold the slots every instance counts.
    const limits = await k.instances[1]!.client(ADMIN_TOKEN).admin.limits()
    expect(limits.concurrency.profiles).toEqual([expect.objectContaining({ profile_id: k.profileId, running: 5 })])
    for (const a of admitted) await k.api(k.instances[0]!).tasks.cancel({ params: { id: a.task_id } })
  })

  it('a task submitted on an instance without room runs on another', async () => {
    const k = await cluster(backend, [0, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    const sub = await k.submit(a, { prompt: '[[berth:text Ran elsewhere.]]' })
    const done = await k.waitDone(a, sub.task_id)
    expect(done.status).toBe('completed')
    expect(done.result?.text).toContain('Ran elsewhere.')
    const ws = await b.berth.services.workspaces.records.get(k.ownerId, sub.workspace_id)
    expect(ws.instance_id).toBe(b.coordination.instanceId)
  })

  it('a task running on another instance is cancelled from the one it was submitted on', async () => {
    const k = await cluster(backend, [0, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    const sub = await k.submit(a, { prompt: slowPrompt(60) })
    await k.waitStatus(a, sub.task_id, 'running')
    const cancelled = await k.api(a).tasks.cancel({ params: { id: sub.task_id } })
    expect(cancelled.status).toBe('cancelled')
    // Its workspace's slot is free again on every instance.
    await vi.waitFor(
      async () => expect(await b.berth.services.coordination.slots.count(`profile:${k.profileId}`)).toBe(0),
      15_000,
    )
  })

  it('a session follow-up submitted on another instance runs in the same container', async () => {
    const k = await cluster(backend, [2, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    const first = await k.submit(a, {
      mode: 'session',
      prompt: '[[berth:tool Bash {"command":"echo here > /workspace/mark.txt"}]] [[berth:text Marked.]]',
    })
    expect((await k.waitDone(a, first.task_id)).status).toBe('completed')
    const records = a.berth.services.workspaces.records
    const before = await records.get(k.ownerId, first.workspace_id)
    expect(before.instance_id).toBe(a.coordination.instanceId)
    expect(before.container_id).toBeTruthy()
    const next = await k.submit(b, {
      mode: 'session',
      session_id: first.session_id!,
      prompt: '[[berth:tool Bash {"command":"cat /workspace/mark.txt"}]] [[berth:text Read it.]]',
    })
    const done = await k.waitDone(b, next.task_id)
    expect(done.status).toBe('completed')
    const after = await records.get(k.ownerId, first.workspace_id)
    expect(after.container_id).toBe(before.container_id)
    expect(after.instance_id).toBe(a.coordination.instanceId)
    const { events } = await k.api(b).tasks.events({ params: { id: next.task_id }, query: { limit: 100 } })
    expect(JSON.stringify(events)).toContain('here')
  })

  it('a subscriber on one instance sees every event of a task running on another once, in order', async () => {
    const k = await cluster(backend, [0, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    // A WebSocket client of instance a, as a user would watch it.
    const socket = new WebSocket(`${a.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${k.token}` },
    })
    const received: SocketServerMessage[] = []
    socket.on('message', (data) => received.push(JSON.parse(String(data))))
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    const sub = await k.submit(a, { prompt: slowPrompt(2, 'Seen from afar.') })
    const seen: TaskBusMessage[] = []
    a.berth.services.bus.subscribe(sub.task_id, (m) => seen.push(m))
    socket.send(JSON.stringify({ type: 'subscribe', task_id: sub.task_id }))
    const done = await k.waitDone(b, sub.task_id)
    expect(done.status).toBe('completed')
    const { events: stored } = await k.api(b).tasks.events({ params: { id: sub.task_id }, query: { limit: 100 } })
    await vi.waitFor(
      () => expect(seen.filter((m) => m.type === 'task.status').map((m) => m.status)).toContain('completed'),
      15_000,
    )
    const events = seen.flatMap((m) => (m.type === 'task.event' ? [m.event.seq] : []))
    expect(stored.length).toBeGreaterThan(2)
    expect(events).toEqual(stored.map((e) => e.seq))
    expect(seen.filter((m) => m.type === 'task.status').map((m) => m.status)).toEqual(
      expect.arrayContaining(['starting', 'running', 'completed']),
    )
    await vi.waitFor(
      () => expect(received).toContainEqual(expect.objectContaining({ type: 'task.status', status: 'completed' })),
      15_000,
    )
    expect(received.flatMap((m) => (m.type === 'task.event' ? [m.event.seq] : []))).toEqual(stored.map((e) => e.seq))
    socket.close()
  })

  it('a dead instance’s running task ends CONTAINER_FAILED on a survivor and its queued follow-up runs elsewhere', async () => {
    const k = await cluster(backend, [2, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    const first = await k.submit(b, { mode: 'session', prompt: slowPrompt(120) })
    await k.waitStatus(b, first.task_id, 'running')
    // Queued behind the running prompt, in the same session: on b.
    const next = await k.submit(b, {
      mode: 'session',
      session_id: first.session_id!,
      prompt: '[[berth:text Survived.]]',
    })
    expect((await k.api(b).tasks.get({ params: { id: next.task_id } })).status).toBe('queued')
    // b dies: its heartbeat stops (its runner keeps going, as a partitioned instance's would).
    await b.coordination.close()
    const lost = await k.waitDone(a, first.task_id)
    expect(lost.status).toBe('failed')
    expect(lost.error).toMatchObject({ code: 'CONTAINER_FAILED' })
    expect(lost.error?.error).toContain('instance')
    const ran = await k.waitDone(a, next.task_id)
    expect(ran.status).toBe('completed')
    const ws = await a.berth.services.workspaces.records.get(k.ownerId, first.workspace_id)
    expect(ws.instance_id).toBe(a.coordination.instanceId)
  })

  it('a playbook run waiting for a slot counts the slots every instance holds', async () => {
    const k = await cluster(backend, [6, 2])
    c = k
    const [a, b] = k.instances as [Instance, Instance]
    // Five sessions running on a hold the profile's five slots (an idle one would yield its slot).
    const sessions = await Promise.all(
      Array.from({ length: 5 }, () => k.submit(a, { mode: 'session', prompt: slowPrompt(120) })),
    )
    for (const s of sessions) await k.waitStatus(a, s.task_id, 'running')
    const pb = await k.api(b).playbooks.create({
      body: { profile_id: k.profileId, name: 'Waits', prompt: 'Run when there is room. [[berth:text Ran.]]' },
    })
    await k.api(b).playbooks.run({ params: { id: pb.id } })
    const runTask = async () => {
      const { runs } = await k.api(b).playbooks.runs({ params: { id: pb.id } })
      return runs[0]?.task_id ? await k.api(b).tasks.get({ params: { id: runs[0].task_id } }) : null
    }
    // b has no slot of its own in use, but the five are a's: the run waits, asking again and again.
    for (let i = 0; i < 3; i++) {
      // Real time is the point: the run must still be waiting after several of its retries.
      await new Promise((r) => setTimeout(r, 1_200))
      expect((await runTask())?.status ?? 'queued').toBe('queued')
    }
    // One of a's sessions is deleted (its task stopped): its slot frees for every instance, and the run takes it.
    await k.api(a).workspaces.delete({ params: { id: sessions[0]!.workspace_id } })
    const done = await vi.waitFor(async () => {
      const t = await runTask()
      expect(t?.status).toBe('completed')
      return t!
    }, 60_000)
    expect(done.result?.text).toContain('Ran.')
    for (const s of sessions.slice(1)) await k.api(a).workspaces.delete({ params: { id: s.workspace_id } })
  })
}
