/**
 * Tasks over several Berth instances (issue 11): in-process instances on the `local`
 * runtime (bubblewrap) sharing one store and one coordination backend, with the offline
 * model. One limit over all, work taken where there is room, follow-ups routed to the
 * instance holding the session's container, live events across instances, a dead
 * instance's tasks taken over.
 */
import { memoryCoordination, memoryHub, type TaskBusMessage, type TranscriptEvent } from '@berth/core'
import { createCoordination, redisStore } from '@berth/server'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { eventually } from './pool.helpers.js'
import { slowPrompt, startCluster, type Backend } from './tasks-instances.helpers.js'
import type { Json } from './helpers.js'

type Cluster = Awaited<ReturnType<typeof startCluster>>

const memoryBackend = (): Backend => {
  const hub = memoryHub()
  return { coordination: (i) => memoryCoordination({ hub, instanceId: `inst-${i}`, leaseMs: 1_000 }) }
}

let redis: LocalRedis | undefined
let run = 0
/** One real redis-server: the store and the coordination of every instance in it, a prefix per test. */
const redisBackend = (): Backend => {
  const prefix = `ti${++run}:`
  return {
    coordination: () => createCoordination({ driver: 'redis', url: redis!.path, prefix: `${prefix}c:`, leaseMs: 1_000 }),
    store: () => redisStore({ client: redis!.connect(), prefix: `${prefix}s:` }),
  }
}

describe('tasks over several instances (memory coordination)', () => clusterCases(memoryBackend))

describe('tasks over several instances (redis store and coordination)', () => {
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  clusterCases(redisBackend)
})

function clusterCases(onHub: () => Backend): void {
  let cluster: Cluster | undefined
  afterEach(async () => {
    await cluster?.close()
    cluster = undefined
  })

  it('20 parallel submits over 3 instances admit exactly the profile’s 5', async () => {
    cluster = await startCluster([4, 4, 4], onHub())
    const c = cluster
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => c.submit(c.instances[i % 3]!, { prompt: slowPrompt(30) })))
    const admitted = answers.filter((a) => a.status === 202)
    const refused = answers.filter((a) => a.status === 429)
    expect(admitted).toHaveLength(5)
    expect(refused).toHaveLength(15)
    for (const r of refused) {
      expect(r.body).toMatchObject({ code: 'CONCURRENCY_LIMIT', details: { limit: 5, running: 5, retry_after: 10 } })
      expect(r.headers.get('retry-after')).toBe('10')
    }
    // The admitted ones hold the slots every instance counts.
    const limits = await (await c.instances[1]!.s.request('/admin/limits', { token: 'test-operator-token-0123456789' })).json()
    expect(limits.concurrency.profiles).toEqual([expect.objectContaining({ profile_id: c.profileId, running: 5 })])
    for (const a of admitted) await c.instances[0]!.call('POST', `/v1/tasks/${a.body.task_id}/cancel`)
  })

  it('a task submitted on an instance without room runs on another', async () => {
    cluster = await startCluster([0, 2], onHub())
    const [a, b] = cluster.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    const sub = await cluster.submit(a, { prompt: '[[berth:text Ran elsewhere.]]' })
    expect(sub.status).toBe(202)
    const done = await cluster.waitDone(a, sub.body.task_id)
    expect(done.status).toBe('completed')
    expect(done.result?.text).toContain('Ran elsewhere.')
    const ws = await b.s.berth.services.workspaces.records.get(cluster.ownerId, sub.body.workspace_id)
    expect(ws.instance_id).toBe(b.coordination.instanceId)
  })

  it('a task running on another instance is cancelled from the one it was submitted on', async () => {
    cluster = await startCluster([0, 2], onHub())
    const [a, b] = cluster.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    const sub = await cluster.submit(a, { prompt: slowPrompt(60) })
    await cluster.waitStatus(a, sub.body.task_id, ['running'])
    const cancelled = await a.call('POST', `/v1/tasks/${sub.body.task_id}/cancel`)
    expect(cancelled.status).toBe(200)
    expect(cancelled.body.status).toBe('cancelled')
    // Its workspace's slot is free again on every instance.
    await eventually(async () => expect(await b.s.berth.services.coordination.slots.count(`profile:${cluster!.profileId}`)).toBe(0))
  })

  it('a session follow-up submitted on another instance runs in the same container', async () => {
    cluster = await startCluster([2, 2], onHub())
    const [a, b] = cluster.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    const first = await cluster.submit(a, { mode: 'session', prompt: '[[berth:tool Bash {"command":"echo here > /workspace/mark.txt"}]] [[berth:text Marked.]]' })
    expect(first.status).toBe(202)
    expect((await cluster.waitDone(a, first.body.task_id)).status).toBe('completed')
    const records = a.s.berth.services.workspaces.records
    const before = await records.get(cluster.ownerId, first.body.workspace_id)
    expect(before.instance_id).toBe(a.coordination.instanceId)
    expect(before.container_id).toBeTruthy()
    const next = await cluster.submit(b, { mode: 'session', session_id: first.body.session_id, prompt: '[[berth:tool Bash {"command":"cat /workspace/mark.txt"}]] [[berth:text Read it.]]' })
    expect(next.status).toBe(202)
    const done = await cluster.waitDone(b, next.body.task_id)
    expect(done.status).toBe('completed')
    const after = await records.get(cluster.ownerId, first.body.workspace_id)
    expect(after.container_id).toBe(before.container_id)
    expect(after.instance_id).toBe(a.coordination.instanceId)
    const events = (await b.call('GET', `/v1/tasks/${next.body.task_id}/events?limit=100`)).body.events as TranscriptEvent[]
    expect(JSON.stringify(events)).toContain('here')
  })

  it('a subscriber on one instance sees every event of a task running on another once, in order', async () => {
    cluster = await startCluster([0, 2], onHub())
    const [a, b] = cluster.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    // A WebSocket client of instance a, as a user would watch it.
    const socket = new WebSocket(`${a.s.url.replace('http', 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${cluster.token}` } })
    const received: Json[] = []
    socket.on('message', (data) => received.push(JSON.parse(String(data))))
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    const sub = await cluster.submit(a, { prompt: slowPrompt(2, 'Seen from afar.') })
    const seen: TaskBusMessage[] = []
    a.s.berth.services.bus.subscribe(sub.body.task_id, (m) => seen.push(m))
    socket.send(JSON.stringify({ type: 'subscribe', task_id: sub.body.task_id }))
    const done = await cluster.waitDone(b, sub.body.task_id)
    expect(done.status).toBe('completed')
    const res = await b.call('GET', `/v1/tasks/${sub.body.task_id}/events?limit=100`)
    const stored = res.body.events as TranscriptEvent[]
    await eventually(() => expect(seen.filter((m) => m.type === 'task.status').map((m) => m.status)).toContain('completed'))
    const events = seen.flatMap((m) => (m.type === 'task.event' ? [m.event.seq] : []))
    expect(stored.length).toBeGreaterThan(2)
    expect(events).toEqual(stored.map((e) => e.seq))
    expect(seen.filter((m) => m.type === 'task.status').map((m) => m.status)).toEqual(expect.arrayContaining(['starting', 'running', 'completed']))
    await eventually(() => expect(received.some((m) => m.type === 'task.status' && m.status === 'completed')).toBe(true))
    expect(received.filter((m) => m.type === 'task.event').map((m) => m.event.seq)).toEqual(stored.map((e) => e.seq))
    socket.close()
  })

  it('a dead instance’s running task ends CONTAINER_FAILED on a survivor and its queued follow-up runs elsewhere', async () => {
    cluster = await startCluster([2, 2], onHub())
    const [a, b] = cluster.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    const first = await cluster.submit(b, { mode: 'session', prompt: slowPrompt(120) })
    expect(first.status).toBe(202)
    await cluster.waitStatus(b, first.body.task_id, ['running'])
    // Queued behind the running prompt, in the same session: on b.
    const next = await cluster.submit(b, { mode: 'session', session_id: first.body.session_id, prompt: '[[berth:text Survived.]]' })
    expect(next.status).toBe(202)
    expect((await b.call('GET', `/v1/tasks/${next.body.task_id}`)).body.status).toBe('queued')
    // b dies: its heartbeat stops (its runner keeps going, as a partitioned instance's would).
    await b.coordination.close()
    const lost = await cluster.waitDone(a, first.body.task_id)
    expect(lost.status).toBe('failed')
    expect(lost.error).toMatchObject({ code: 'CONTAINER_FAILED' })
    expect(lost.error?.error).toContain('instance')
    const ran = await cluster.waitDone(a, next.body.task_id)
    expect(ran.status).toBe('completed')
    const ws = await a.s.berth.services.workspaces.records.get(cluster.ownerId, first.body.workspace_id)
    expect(ws.instance_id).toBe(a.coordination.instanceId)
  })

  it('a playbook run waiting for a slot counts the slots every instance holds', async () => {
    cluster = await startCluster([6, 2], onHub())
    const c = cluster
    const [a, b] = c.instances as [NonNullable<Cluster['instances'][0]>, NonNullable<Cluster['instances'][0]>]
    // Five warm sessions on a hold the profile's five slots after their prompts end.
    const sessions = await Promise.all(Array.from({ length: 5 }, () => c.submit(a, { mode: 'session', prompt: '[[berth:text Holding.]]' })))
    for (const s of sessions) expect((await c.waitDone(a, s.body.task_id)).status).toBe('completed')
    const pb = await b.call('POST', '/v1/playbooks', { profile_id: c.profileId, name: 'Waits', prompt: 'Run when there is room. [[berth:text Ran.]]' })
    const run = await b.call('POST', `/v1/playbooks/${pb.body.id}/run`)
    expect(run.status).toBe(202)
    const runTask = async () => {
      const list = (await b.call('GET', `/v1/playbooks/${pb.body.id}/runs`)).body.runs as Array<{ task_id: string | null }>
      return list[0]?.task_id ? (await b.call('GET', `/v1/tasks/${list[0].task_id}`)).body : null
    }
    // b has no slot of its own in use, but the five are a's: the run waits, asking again and again.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 1_200))
      expect((await runTask())?.status ?? 'queued').toBe('queued')
    }
    // One of a's sessions ends: its slot frees for every instance, and the run takes it.
    await a.call('DELETE', `/v1/workspaces/${sessions[0]!.body.workspace_id}`)
    const done = await eventually(async () => {
      const t = await runTask()
      expect(t?.status).toBe('completed')
      return t!
    }, 60_000)
    expect(done.result?.text).toContain('Ran.')
    for (const s of sessions.slice(1)) await a.call('DELETE', `/v1/workspaces/${s.body.workspace_id}`)
  })
}
