/**
 * Three standalone servers as real child processes on one real Redis (`BERTH_STORAGE=redis`:
 * records and coordination), each driving its own engine: A on Docker's socket, B on Docker
 * reached over `tcp://` (a local proxy, as a remote host would be), C on Podman. They must
 * behave as one Berth: the concurrency and rate limits hold over their sum, a WebSocket on
 * one sees another's task, a SIGKILLed instance's tasks end or move, and nothing is left on
 * any engine.
 */
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import WebSocket from 'ws'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { SocketServerMessage, TaskEvent } from '@berth/client'
import { readEngine, startRedis, type LocalRedis } from '@berth/testkit'
import { clientFor, failure } from './helpers.js'
import {
  ADMIN,
  ENDED,
  killHard,
  pollTask,
  startInstance,
  tcpProxy,
  userWithProfile,
  type Instance,
  type TcpProxy,
} from './multi-instance.helpers.js'
import { engineRuntime, onEngine, sweep } from './pool.helpers.js'

let redis: LocalRedis
let proxy: TcpProxy
let a: Instance
let b: Instance
let c: Instance
const started: Instance[] = []
let shared: Record<string, string>

beforeAll(async () => {
  redis = await startRedis()
  proxy = await tcpProxy(readEngine('docker').socketPath)
  // ioredis takes a unix socket path where a URL goes.
  // One encryption key for all, as operators must: secrets are stored once, in Redis.
  shared = {
    BERTH_REDIS_URL: redis.path,
    BERTH_REDIS_PREFIX: `mi-${randomBytes(4).toString('hex')}:`,
    BERTH_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
  }
  const tag = randomBytes(3).toString('hex')
  ;[a, b, c] = await Promise.all([
    startInstance({ id: `mi-a-${tag}`, engine: 'docker', settings: shared }),
    startInstance({ id: `mi-b-${tag}`, engine: 'docker', engineUrl: proxy.url, settings: shared }),
    startInstance({ id: `mi-c-${tag}`, engine: 'podman', settings: shared }),
  ])
  started.push(a, b, c)
}, 300_000)

afterAll(async () => {
  await Promise.all(started.map((i) => i.stop()))
  // Only the containers of this suite's own pools.
  for (const i of started) await sweep(engineRuntime(i.engine).runtime, i.pool)
  for (const i of started) rmSync(i.dataDir, { recursive: true, force: true })
  await proxy?.close()
  await redis?.stop()
}, 120_000)

const instances = () => [a, b, c]

describe('three instances on one Redis, each on its own engine', () => {
  it('each names its engine and the shared coordination', () => {
    expect(a.output()).toMatch(/Runtime: docker \(unix:\/\/\/var\/run\/docker\.sock, BERTH_ENGINE_URL\)/)
    expect(b.output()).toContain(`Runtime: docker (http://${proxy.url.slice('tcp://'.length)}, BERTH_ENGINE_URL)`)
    expect(c.output()).toMatch(/Runtime: podman \(unix:\/\/\/run\/podman\/podman\.sock, BERTH_ENGINE_URL\)/)
    for (const i of instances()) expect(i.output()).toContain(`instance ${i.id}`)
  })

  it('20 parallel submits on one profile, spread over the instances, admit exactly 5', async () => {
    const { token, profileId } = await userWithProfile(a.url, 'Concurrency')
    const body = {
      mode: 'batch' as const,
      profile_id: profileId,
      prompt: 'Hold a slot. [[berth:slow 300]] [[berth:turns 4]]',
    }
    const via = (n: number) => clientFor(instances()[n % 3]!, token)
    const answers = await Promise.allSettled(
      Array.from({ length: 20 }, (_, n) =>
        via(n)
          .tasks.submit({ body })
          .then((sub) => ({ sub, api: via(n) })),
      ),
    )
    const admitted = answers.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    const refused = await Promise.all(
      answers.flatMap((r) => (r.status === 'rejected' ? [failure(Promise.reject(r.reason))] : [])),
    )
    expect(admitted, refused.map((e) => `${e.status} ${JSON.stringify(e.body)}`).join('\n')).toHaveLength(5)
    // The caller's rate limit (burst 10) refuses some before the slots are asked; the rest met the profile's 5.
    for (const r of refused) {
      expect(r.status, JSON.stringify(r.body)).toBe(429)
      expect(['CONCURRENCY_LIMIT', 'RATE_LIMITED']).toContain(r.code)
    }
    const overLimit = refused.filter((r) => r.code === 'CONCURRENCY_LIMIT')
    expect(overLimit.length).toBeGreaterThan(0)
    for (const r of overLimit) expect(r.details).toMatchObject({ limit: 5 })
    // The admitted ones run to the end (slots freed for the cases below).
    for (const { sub, api } of admitted) {
      const done = await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 120_000)
      expect(done.status, JSON.stringify(done)).toBe('completed')
    }
  }, 240_000)

  it('11 rapid requests of one caller, spread over the instances, get exactly one 429', async () => {
    const made = await clientFor(a, ADMIN).admin.users.create({ body: { name: 'Rate' } })
    const token = made.key.token
    const answers = await Promise.allSettled(
      Array.from({ length: 11 }, (_, n) => clientFor(instances()[n % 3]!, token).tasks.list()),
    )
    expect(answers.filter((r) => r.status === 'fulfilled')).toHaveLength(10)
    const limited = await Promise.all(
      answers.flatMap((r) => (r.status === 'rejected' ? [failure(Promise.reject(r.reason))] : [])),
    )
    expect(limited.map((e) => e.status)).toEqual([429])
    expect(limited[0]!.code).toBe('RATE_LIMITED')
  })

  it('a WebSocket subscriber on A sees every event of a task submitted to B, exactly once, in order', async () => {
    const { token, profileId } = await userWithProfile(a.url, 'Watcher')
    const socket = new WebSocket(`${a.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const messages: SocketServerMessage[] = []
    socket.on('message', (data) => messages.push(JSON.parse(String(data))))
    await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject))
    try {
      const sub = await clientFor(b, token).tasks.submit({
        body: {
          mode: 'batch',
          profile_id: profileId,
          prompt: 'Stream. [[berth:slow 80]] [[berth:turns 3]] [[berth:text the end]]',
        },
      })
      const taskId = sub.task_id
      socket.send(JSON.stringify({ type: 'subscribe', task_id: taskId }))
      await vi.waitFor(() => {
        if (!messages.some((m) => m.type === 'task.status' && m.task_id === taskId && ENDED.includes(m.status)))
          throw new Error('not ended yet')
      }, 120_000)
      const got: TaskEvent[] = messages.flatMap((m) =>
        m.type === 'task.event' && m.task_id === taskId ? [m.event] : [],
      )
      const { events: stored } = await clientFor(c, token).tasks.events({
        params: { id: taskId },
        query: { limit: 100 },
      })
      expect(stored.at(-1)!.type).toBe('result')
      expect(got.map((e) => e.seq)).toEqual(stored.map((e) => e.seq))
      expect(got).toEqual(stored)
      const final = messages.flatMap((m) =>
        m.type === 'task.status' && m.task_id === taskId && ENDED.includes(m.status) ? [m] : [],
      )
      expect(final.map((m) => m.status)).toEqual(['completed'])
    } finally {
      socket.close()
    }
  }, 180_000)

  it('SIGKILL of C mid-task: its running task ends definitely, its queued follow-up runs on a survivor, and nothing is orphaned', async () => {
    const { token, profileId } = await userWithProfile(a.url, 'Killed')
    const onC = clientFor(c, token)
    const first = await onC.tasks.submit({
      body: { mode: 'session', profile_id: profileId, prompt: 'Long. [[berth:slow 1000]] [[berth:turns 300]]' },
    })
    await pollTask(onC, first.task_id, (t) => t.status === 'running', 90_000)
    // Queued on C behind the running prompt of its session.
    const followUp = await onC.tasks.submit({
      body: {
        mode: 'session',
        profile_id: profileId,
        session_id: first.session_id!,
        prompt: 'After. [[berth:tool Bash {"command":"echo survived"}]]',
      },
    })
    expect(followUp.status).toBe('queued')

    await killHard(c)
    // Read through a survivor: after C's lease and the grace, one of them ends C's running task.
    const ended = await pollTask(clientFor(a, token), first.task_id, (t) => ENDED.includes(t.status), 180_000)
    expect(['completed', 'failed'], JSON.stringify(ended)).toContain(ended.status)
    if (ended.status === 'failed') expect(ended.error?.code).toBe('CONTAINER_FAILED')
    const moved = await pollTask(clientFor(b, token), followUp.task_id, (t) => ENDED.includes(t.status), 180_000)
    expect(moved.status, JSON.stringify(moved)).toBe('completed')
    expect(JSON.stringify(moved.result?.tool_calls)).toContain('survived')

    // C comes back under its id, pool and data dir: it removes what its killed run left on Podman.
    const back = await startInstance({ id: c.id, engine: 'podman', pool: c.pool, dataDir: c.dataDir, settings: shared })
    started.push(back)
    for (const i of [a, b, back]) {
      await vi.waitFor(async () => {
        const health = await clientFor(i).health()
        const listed = await onEngine(engineRuntime(i.engine).runtime, i.pool)
        // Every container under the instance's pool label is one its pool accounts for (the
        // session that moved keeps its warm container in use on the survivor).
        expect(listed.length, `${i.id}: ${JSON.stringify(listed)} vs ${JSON.stringify(health.pool)}`).toBe(
          health.pool.idle + health.pool.in_use,
        )
      }, 60_000)
    }
  }, 420_000)
})
