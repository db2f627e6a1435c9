/**
 * Redis holds nothing that cannot be rebuilt (issue 27): three in-process instances on
 * Postgres (records, transcripts) and Redis (coordination) run 40 tasks on the `local`
 * runtime with the offline model; Redis is SIGKILLed mid-load and restarted empty. Every
 * task ends definitely, none is lost or run twice, transcripts are dense, the tasks that
 * waited in the queue run once Redis is back (the rebuild its reset starts; the slow
 * reconcile is off), and an OAuth state and a WebSocket request_id used before the flush
 * stay used after it. While Redis is down, reads answer and nothing is a 5xx but 503.
 */
import type { SocketServerMessage, Task } from '@berth/client'
import { postgresStore } from '@berth/server'
import { startPostgres, startRedis, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, expect, it, vi } from 'vitest'
import WebSocket from 'ws'
import { agentUser, startCluster, type Cluster, type Instance } from './cluster.helpers.js'
import { waitForTask } from './helpers.js'

const TASKS = 40
const ENDED = ['completed', 'failed', 'cancelled']

let pg: LocalPostgres | undefined
let redis: LocalRedis | undefined
let c: Cluster | undefined
beforeAll(async () => {
  pg = await startPostgres()
  redis = await startRedis()
})
afterAll(async () => {
  try {
    await c?.close()
  } finally {
    await redis?.stop()
    await pg?.stop()
  }
})

/** A WebSocket client of `instance`: send a submit, read its `submitted` answer. */
async function submitOverSocket(instance: Instance, token: string, requestId: string, task: object) {
  const socket = new WebSocket(`${instance.url.replace('http', 'ws')}/v1/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  const messages: SocketServerMessage[] = []
  socket.on('message', (data) => messages.push(JSON.parse(String(data))))
  await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject))
  socket.send(JSON.stringify({ type: 'submit', request_id: requestId, task }))
  try {
    return await vi.waitFor(() => {
      const m = messages.find((x) => x.type === 'submitted' || x.type === 'error')
      if (!m) throw new Error('no answer yet')
      return m
    }, 30_000)
  } finally {
    socket.close()
  }
}

it('40 tasks over 3 instances survive a SIGKILL of Redis and its restart empty', { timeout: 400_000 }, async () => {
  const k = await startCluster('redis', {
    // The coordination is opened on this socket; the records go to Postgres.
    redis: { path: redis!.path } as LocalRedis,
    store: () => postgresStore(pg!.url),
    leaseMs: 2_000,
    local: { maxes: [3, 3, 3], sandbox: 'bwrap' },
    berth: { concurrency: 100, reconcileMs: null },
  })
  c = k
  const user = await agentUser(k)
  const [a, b, third] = k.instances as [Instance, Instance, Instance]
  const api = (i: Instance) => i.client(user.token)
  const body = (prompt: string) => ({ mode: 'batch' as const, profile_id: user.profileId, prompt })

  // Single-use keys used before the flush.
  const before = await submitOverSocket(a, user.token, 'req-before-flush', body('Before [[berth:text ok]]'))
  expect(before.type).toBe('submitted')
  const states = a.berth.services.oauthStates
  const flow = { owner: user.id, flow: 'github', returnPath: '/', redirectUri: 'http://127.0.0.1/cb', pkce: false }
  const { state } = await states.issue(flow)
  await states.consume(state, { flow: 'github' })

  const ids: string[] = []
  for (let i = 0; i < TASKS; i++) {
    const via = k.instances[i % 3]!
    const prompt = `Task ${i} [[berth:slow 300]] [[berth:turns 2]] [[berth:text done ${i}]]`
    ids.push((await api(via).tasks.submit({ body: body(prompt) })).task_id)
  }
  // Mid-load: some ended, some still waiting in a queue.
  await vi.waitFor(
    async () => {
      const done = (await api(a).tasks.list({ query: { status: 'completed', limit: 100 } })).total
      expect(done).toBeGreaterThanOrEqual(3)
    },
    { timeout: 120_000, interval: 250 },
  )
  const queuedAtKill = (await api(b).tasks.list({ query: { status: 'queued', limit: 100 } })).tasks.map(
    (t) => t.task_id,
  )
  expect(queuedAtKill.length).toBeGreaterThan(0)

  await redis!.kill()
  // While Redis is down: reads are served, a submit is refused with 503 (or accepted), never a 500.
  const statuses: number[] = []
  try {
    for (let round = 0; round < 3; round++) {
      for (const inst of k.instances) {
        statuses.push((await inst.request(`/v1/tasks/${ids[round]}`, { token: user.token })).status)
        statuses.push((await inst.request('/v1/tasks?limit=5', { token: user.token })).status)
      }
      await new Promise((r) => setTimeout(r, 1_000))
    }
    const during = await third.request('/v1/tasks', { token: user.token, method: 'POST', json: body('During') })
    statuses.push(during.status)
    if (during.status === 202) ids.push(((await during.json()) as { task_id: string }).task_id)
  } finally {
    await redis!.start()
  }
  const backAt = Date.now()
  expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([])
  expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0)

  // Every task ends definitely, each failure or cancel with a code.
  const ended: Task[] = []
  for (const id of ids) ended.push(await waitForTask(api(a), id, { timeout: 240_000, interval: 500 }))
  for (const t of ended) {
    expect(ENDED).toContain(t.status)
    if (t.status !== 'completed') expect(t.error?.code, `${t.task_id} ${t.status}`).toMatch(/^[A-Z_]+$/)
  }
  // The tasks that waited in a queue when Redis died and started once it was back all completed
  // (one that started while it was down may have been fenced: CONTAINER_FAILED above).
  const resumed = ended.filter((t) => queuedAtKill.includes(t.task_id) && Date.parse(t.started_at ?? '') >= backAt)
  expect(resumed.length).toBeGreaterThan(0)
  for (const t of resumed) expect(t.status, `${t.task_id}: ${JSON.stringify(t.error)}`).toBe('completed')
  // None lost or duplicated: one record per submit, one prompt and at most one result each, dense transcripts.
  const all = await api(third).tasks.list({ query: { limit: 100 } })
  expect(all.total).toBe(ids.length + 1)
  for (const id of ids) {
    const { events } = await api(b).tasks.events({ params: { id }, query: { limit: 100 } })
    const seqs = events.map((e) => e.seq)
    expect(seqs, id).toEqual(seqs.map((_, i) => seqs[0]! + i))
    expect(
      events.filter((e) => e.type === 'user_message'),
      id,
    ).toHaveLength(1)
    expect(events.filter((e) => e.type === 'result').length, id).toBeLessThanOrEqual(1)
  }

  // Still single-use: the request_id answers with its first task, the OAuth state is refused.
  const resend = await submitOverSocket(b, user.token, 'req-before-flush', body('Before [[berth:text ok]]'))
  expect(resend).toMatchObject({ type: 'submitted', task_id: (before as { task_id: string }).task_id })
  await expect(b.berth.services.oauthStates.consume(state, { flow: 'github' })).rejects.toMatchObject({
    code: 'VALIDATION_FAILED',
  })
})
