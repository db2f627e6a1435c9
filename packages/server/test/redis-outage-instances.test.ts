/**
 * Two instances on Postgres + Redis while Redis is away (issue 27): reads and record writes
 * go on, submits answer 503 with Retry-After, readiness says no, and everything works again
 * when Redis returns (empty) without restarting the instances. Fencing by lease: an instance
 * cut off from Redis longer than its lease stops driving its running task, a survivor ends it
 * CONTAINER_FAILED, and the cut instance writes nothing more for it once it is back.
 */
import { postgresStore } from '@berth/server'
import { startPostgres, startRedis, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import WebSocket from 'ws'
import { agentUser, startCluster, type Cluster, type Instance } from './cluster.helpers.js'
import { waitForTask } from './helpers.js'
import { severableProxy, type SeverableProxy } from './redis-outage.helpers.js'

/** A prompt whose agent takes `turns` slow turns (about a second each), then answers. */
const slowPrompt = (turns: number) =>
  `Take your time. [[berth:slow 1000]] [[berth:turns ${turns}]] [[berth:text Done.]]`

let pg: LocalPostgres
let redis: LocalRedis
let proxy: SeverableProxy | undefined
let cluster: Cluster | undefined
beforeAll(async () => {
  pg = await startPostgres()
  redis = await startRedis()
})
afterEach(async () => {
  // A failed fencing case may leave the proxy cut: instances close with Redis in reach.
  proxy?.restore()
  await cluster?.close()
  await proxy?.close()
  cluster = proxy = undefined
})
afterAll(async () => {
  await redis?.stop()
  await pg?.stop()
})

/** Two instances on one Postgres, each reaching Redis at `urls[i]`, with short leases. */
async function twoInstances(urls: [string, string], maxes: [number, number]) {
  cluster = await startCluster('redis', {
    redisUrl: (i) => urls[i]!,
    store: () => postgresStore(pg.url),
    coordination: { commandTimeoutMs: 500 },
    leaseMs: 1_000,
    local: { maxes, sandbox: 'bwrap' },
    berth: { recoveryGraceMs: 300 },
  })
  const user = await agentUser(cluster)
  const [a, b] = cluster.instances as [Instance, Instance]
  const submit = (inst: Instance, prompt: string) =>
    inst.request('/v1/tasks', {
      method: 'POST',
      token: user.token,
      json: { mode: 'batch', profile_id: user.profileId, prompt },
    })
  return { a, b, user, submit }
}

describe('two instances on Postgres while Redis is away', () => {
  it('serve reads and record writes, refuse submits with 503 and Retry-After, and work again when Redis returns empty', async () => {
    const { a, b, user, submit } = await twoInstances([redis.path, redis.path], [2, 2])
    const first = (await (await submit(a, '[[berth:text Before.]]')).json()) as { task_id: string }
    expect((await waitForTask(a.client(user.token), first.task_id)).status).toBe('completed')
    expect((await a.request('/health/ready')).status).toBe(200)

    await redis.kill()
    for (const inst of [a, b])
      await vi.waitFor(
        () => expect(inst.coordination.state()).toMatchObject({ reachable: false, leased: false }),
        5_000,
      )
    const statuses: number[] = []
    for (const inst of [a, b]) {
      const read = await inst.request(`/v1/tasks/${first.task_id}`, { token: user.token })
      statuses.push(read.status)
      expect(read.status).toBe(200)
      const refused = await submit(inst, '[[berth:text During.]]')
      statuses.push(refused.status)
      expect(refused.status).toBe(503)
      expect(refused.headers.get('retry-after')).toBe('5')
      expect(await refused.json()).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { retry_after: 5 } })
      const ready = await inst.request('/health/ready')
      statuses.push(ready.status)
      expect(ready.status).toBe(503)
      expect(await ready.json()).toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        details: { checks: { store: true, coordination: false } },
      })
      const health = await inst.request('/health')
      expect(health.status).toBe(200)
      expect(await health.json()).toMatchObject({
        ok: true,
        store: { driver: 'postgres', reachable: true },
        coordination: { driver: 'redis', reachable: false, leased: false },
      })
      // A record write goes to the store (and its rate limit is counted here meanwhile).
      const memory = await inst.request('/v1/memory', {
        method: 'POST',
        token: user.token,
        json: { type: 'fact', name: 'outage', body: 'written while Redis was away' },
      })
      statuses.push(memory.status)
      expect(memory.status).toBeLessThan(300)
    }
    // A WebSocket submit (the upgrade's rate limit counted locally) gets the same answer as a message.
    const socket = new WebSocket(`${a.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${user.token}` },
    })
    const answered = new Promise<Record<string, unknown>>((resolve) =>
      socket.once('message', (data) => resolve(JSON.parse(String(data)))),
    )
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    socket.send(
      JSON.stringify({
        type: 'submit',
        request_id: 'req-outage',
        task: { mode: 'batch', profile_id: user.profileId, prompt: 'During.' },
      }),
    )
    expect(await answered).toMatchObject({ type: 'error', request_id: 'req-outage', code: 'SERVICE_UNAVAILABLE' })
    socket.close()
    // Nothing was stored for the refused submits.
    const list = await a.request('/v1/tasks', { token: user.token })
    expect(((await list.json()) as { total: number }).total).toBe(1)
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([])

    await redis.start()
    for (const inst of [a, b])
      await vi.waitFor(() => expect(inst.coordination.state()).toMatchObject({ reachable: true, leased: true }), 10_000)
    expect((await b.request('/health/ready')).status).toBe(200)
    const again = await submit(b, '[[berth:text After.]]')
    expect(again.status).toBe(202)
    const after = (await again.json()) as { task_id: string }
    expect((await waitForTask(b.client(user.token), after.task_id)).status).toBe('completed')
  })

  it('fence an instance cut off from Redis: a survivor ends its task, and it writes nothing more for it', async () => {
    proxy = await severableProxy(redis.path)
    const { a, b, user, submit } = await twoInstances([proxy.url, redis.path], [2, 1])
    const sub = (await (await submit(a, slowPrompt(60))).json()) as { task_id: string }
    const api = b.client(user.token)
    await waitForTask(api, sub.task_id, { until: (t) => t.status === 'running' })
    const record = await a.berth.services.tasks.records.get(user.id, sub.task_id)
    expect(record.instance_id).toBe(a.coordination.instanceId)

    proxy.sever()
    await vi.waitFor(() => expect(a.coordination.state().leased).toBe(false), 5_000)
    // Fenced: its run is aborted and its container given back, before any survivor acts.
    await vi.waitFor(() => expect(a.berth.services.pool.stats().in_use).toBe(0), 5_000)
    const ended = await waitForTask(api, sub.task_id)
    expect(ended.status).toBe('failed')
    expect(ended.error?.code).toBe('CONTAINER_FAILED')
    expect(ended.error?.error).toContain('was lost')
    const events = await api.tasks.events({ params: { id: sub.task_id }, query: { limit: 100 } })

    proxy.restore()
    await vi.waitFor(() => expect(a.coordination.state()).toMatchObject({ reachable: true, leased: true }), 10_000)
    // The runner it aborted had more turns to go: nothing of them reaches the task.
    await new Promise((r) => setTimeout(r, 3_000))
    const later = await api.tasks.get({ params: { id: sub.task_id } })
    expect(later).toEqual(ended)
    const eventsLater = await api.tasks.events({ params: { id: sub.task_id }, query: { limit: 100 } })
    expect(eventsLater.total).toBe(events.total)
    // And it takes new work again.
    const next = await submit(a, '[[berth:text Back.]]')
    expect(next.status).toBe(202)
    const done = (await next.json()) as { task_id: string }
    expect((await waitForTask(a.client(user.token), done.task_id)).status).toBe('completed')
  })
})
