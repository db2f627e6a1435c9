/**
 * Several instances on one store and one coordination backend behave as one Berth for what
 * they share besides tasks: the per-caller rate limit and the failed-auth throttle, OAuth
 * states (single use), WebSocket `request_id`s (one task) and webhook retries (each attempt
 * once). Both for a `memoryHub` and for a real redis-server (redis store + redis driver).
 */
import WebSocket from 'ws'
import type { SocketServerMessage } from '@berth/client'
import type { Task } from '@berth/core'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { startFakeGitProvider, type FakeGitProvider } from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startReceiver } from './receivers.js'
import { agentUser, startCluster, type Backend, type Cluster, type Instance } from './cluster.helpers.js'

let redis: LocalRedis
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

const BACKENDS: Backend[] = ['memory', 'redis']

/** A connected WebSocket client that records every message. */
async function wsClient(instance: Instance, token: string) {
  const socket = new WebSocket(`${instance.url.replace('http', 'ws')}/v1/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  const messages: SocketServerMessage[] = []
  socket.on('message', (data) => messages.push(JSON.parse(String(data))))
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
  })
  const submitted = () =>
    vi.waitFor(() => {
      const m = messages.find((m) => m.type === 'submitted')
      if (m?.type !== 'submitted') throw new Error('not yet')
      return m
    }, 30_000)
  return { socket, send: (m: object) => socket.send(JSON.stringify(m)), submitted }
}

describe.each(BACKENDS)('three instances sharing a %s coordination', (backend) => {
  describe('rate limits', () => {
    let c: Cluster
    beforeAll(async () => {
      // A bucket that refills once a minute: no token comes back while the test runs.
      c = await startCluster(backend, { count: 3, redis, berth: { rateLimit: { rpm: 1, burst: 10 } } })
    })
    afterAll(async () => c?.close())

    it('11 rapid requests of one caller spread over the instances get exactly one 429, with agreeing headers', async () => {
      const { token } = await c.user('Rapid')
      const answers = await Promise.all(
        Array.from({ length: 11 }, (_, i) => c.instances[i % 3]!.request('/v1/profiles', { token })),
      )
      const statuses = answers.map((r) => r.status).sort()
      expect(statuses).toEqual([...Array(10).fill(200), 429])
      const ok = answers.filter((r) => r.status === 200)
      // One bucket: the ten admitted requests left 9, 8, … 0 tokens, whichever instance took them.
      expect(ok.map((r) => Number(r.headers.get('ratelimit-remaining'))).sort((a, b) => a - b)).toEqual([
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
      ])
      expect(new Set(answers.map((r) => r.headers.get('ratelimit-policy')))).toEqual(
        new Set(['10;w=600;burst=10;rpm=1']),
      )
      const refused = answers.find((r) => r.status === 429)!
      expect(await refused.json()).toMatchObject({ code: 'RATE_LIMITED' })
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(refused.headers.get('ratelimit-remaining')).toBe('0')
      // The caller's next request, on any instance, is refused too.
      expect((await c.instances[1]!.request('/v1/profiles', { token })).status).toBe(429)
    })

    it('throttles guessed keys by client address over all instances', async () => {
      const answers = await Promise.all(
        Array.from({ length: 11 }, (_, i) =>
          c.instances[i % 3]!.request('/v1/profiles', { token: `berth_sk_guess${i}` }),
        ),
      )
      expect(answers.map((r) => r.status).sort()).toEqual([...Array(10).fill(401), 429])
    })
  })

  describe('single-use keys and retries', () => {
    let c: Cluster
    let github: FakeGitProvider
    beforeAll(async () => {
      github = await startFakeGitProvider({ provider: 'github' })
      c = await startCluster(backend, {
        redis,
        local: { maxes: [4, 4, 4], sandbox: 'none' },
        slowSingleUse: true,
        berth: {
          gitProviders: { github: github.config() },
          notifications: { attempts: 3, backoffMs: 300, timeoutMs: 2000 },
        },
      })
    })
    afterAll(async () => {
      await c?.close()
      await github?.close()
    })

    it('accepts an OAuth state once: the same callback on two instances at once connects one account', async () => {
      const [a, b] = c.instances as [Instance, Instance]
      const { token } = await c.user('OAuth')
      const auth = await a
        .client(token)
        .git.authorize({ params: { provider: 'github' }, query: { returnPath: '/settings' } })
      const consent = await fetch(auth.url, { redirect: 'manual' })
      const callback = new URL(consent.headers.get('location')!)
      const path = callback.pathname + callback.search
      const [onA, onB] = await Promise.all([
        fetch(a.url + path, { redirect: 'manual' }),
        fetch(b.url + path, { redirect: 'manual' }),
      ])
      const answers = [onA, onB].sort((x, y) => x.status - y.status)
      expect(answers.map((r) => r.status)).toEqual([302, 400])
      expect(await answers[1]!.json()).toMatchObject({
        code: 'VALIDATION_FAILED',
        details: { issues: [{ location: 'query', path: 'state', message: expect.stringMatching(/already used/) }] },
      })
      // One code exchanged, one account.
      expect(github.requests.filter((r) => r.path.endsWith('/access_token'))).toHaveLength(1)
      const accounts = await c.instances[2]!.client(token).git.accounts.list()
      expect(accounts.accounts).toHaveLength(1)
    })

    it('a WebSocket submit sent with one request_id to two instances at once creates one task', async () => {
      const [a, b] = c.instances as [Instance, Instance]
      const { token, profileId } = await agentUser(c, 'Sockets')
      const task = { mode: 'batch', profile_id: profileId, prompt: 'Once across instances. [[berth:text Once.]]' }
      const [x, y] = await Promise.all([wsClient(a, token), wsClient(b, token)])
      x.send({ type: 'submit', request_id: 'req-shared', task })
      y.send({ type: 'submit', request_id: 'req-shared', task })
      const [sx, sy] = await Promise.all([x.submitted(), y.submitted()])
      expect(sx.task_id).toMatch(/^task_/)
      expect(sy.task_id).toBe(sx.task_id)
      // A resend after both, on the third instance, is the same task too.
      const z = await wsClient(c.instances[2]!, token)
      z.send({ type: 'submit', request_id: 'req-shared', task })
      expect((await z.submitted()).task_id).toBe(sx.task_id)
      const list = await b.client(token).tasks.list({ query: { limit: 100 } })
      expect(list.tasks.map((t) => t.task_id)).toEqual([sx.task_id])
      // Let it end before the instances close.
      await vi.waitFor(async () => {
        const t = await a.client(token).tasks.get({ params: { id: sx.task_id } })
        expect(['completed', 'failed']).toContain(t.status)
      }, 90_000)
      for (const s of [x, y, z]) s.socket.close()
    })

    it('retries a failing webhook once per attempt, however many instances recover the retry', async () => {
      const [a, b, third] = c.instances as [Instance, Instance, Instance]
      const hook = await startReceiver(() => 503)
      try {
        const { token, id: owner } = await c.user('Hooks')
        const { id: integrationId } = await a
          .client(token)
          .integrations.create({ body: { type: 'webhook', config: { url: hook.url } } })
        await a.berth.services.notifications.notify(owner, 'prof_any', 'task.completed', {
          task: { task_id: 'task_shared' } as Task,
        })
        expect(hook.received).toHaveLength(1)
        // The other instances start (or restart) while the retry waits: each recovers what is stored.
        await Promise.all([b.berth.services.notifications.recover(), third.berth.services.notifications.recover()])
        const deliveries = async () =>
          (await b.client(token).integrations.deliveries({ params: { id: integrationId }, query: { limit: 100 } }))
            .deliveries
        await vi.waitFor(async () => expect((await deliveries()).map((d) => d.attempt)).toContain(3), 30_000)
        // Nothing left waiting: every attempt that was going to happen has happened.
        await vi.waitFor(async () => expect((await a.berth.store.keys('notification-retries:')).length).toBe(0), 15_000)
        expect(hook.received.map((r) => (JSON.parse(r.body) as { event: string }).event)).toEqual([
          'task.completed',
          'task.completed',
          'task.completed',
        ])
        expect((await deliveries()).map((d) => d.attempt).sort()).toEqual([1, 2, 3])
      } finally {
        await hook.close()
      }
    })
  })
})
