/**
 * `/v1/ws` over a real server and real sockets (the `ws` client), with real tasks.
 */
import WebSocket from 'ws'
import type { SocketServerMessage } from '@berth/client'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

/** The server message of one type. */
type Message<T extends SocketServerMessage['type']> = Extract<SocketServerMessage, { type: T }>

let t: Awaited<ReturnType<typeof taskServer>>
beforeAll(async () => {
  t = await taskServer('podman')
})
afterAll(async () => {
  await t.s.close()
  await sweep(t.runtime, t.pool)
})

const wsUrl = (query = '') => `${t.s.url.replace('http', 'ws')}/v1/ws${query}`

/** A connected client that records every message. */
async function connect(opts: { token?: string | null; query?: string } = {}) {
  const token = opts.token === undefined ? t.token : opts.token
  const socket = new WebSocket(wsUrl(opts.query), token ? { headers: { authorization: `Bearer ${token}` } } : {})
  const messages: SocketServerMessage[] = []
  socket.on('message', (data) => messages.push(JSON.parse(String(data))))
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
  })
  /** All messages of one type so far. */
  const ofType = <T extends SocketServerMessage['type']>(type: T) =>
    messages.filter((m): m is Message<T> => m.type === type)
  /** The first message of `type` (that `pred` accepts), once it has arrived. */
  const next = <T extends SocketServerMessage['type']>(
    type: T,
    pred: (m: Message<T>) => boolean = () => true,
    timeoutMs = 30_000,
  ) =>
    vi.waitFor(() => {
      const m = ofType(type).find(pred)
      if (!m) throw new Error('not yet')
      return m
    }, timeoutMs)
  return { socket, messages, ofType, send: (m: object) => socket.send(JSON.stringify(m)), next }
}

/** The HTTP status a refused upgrade answered with. */
function refusedWith(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers })
    socket.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0)
      socket.terminate()
    })
    socket.on('open', () => resolve(101))
    socket.on('error', () => {})
  })
}

describe('connecting', () => {
  it('needs a caller key (header or ?token=) and the right path', async () => {
    expect(await refusedWith(wsUrl())).toBe(401)
    expect(await refusedWith(wsUrl(), { authorization: 'Bearer berth_sk_wrong' })).toBe(401)
    expect(
      await refusedWith(`${t.s.url.replace('http', 'ws')}/v1/elsewhere`, { authorization: `Bearer ${t.token}` }),
    ).toBe(404)
    const viaQuery = await connect({ token: null, query: `?token=${t.token}` })
    viaQuery.send({ type: 'ping' })
    await viaQuery.next('pong')
    viaQuery.socket.close()
    // A plain GET is told to upgrade, in the error shape.
    const plain = await t.s.request('/v1/ws', { token: t.token })
    expect(plain.status).toBe(426)
    expect(await plain.json()).toMatchObject({ code: 'UPGRADE_REQUIRED' })
  })

  it('answers bad messages with error messages and keeps the socket open', async () => {
    const c = await connect()
    c.socket.send('not json')
    c.send({ type: 'launch-rockets' })
    c.send({ type: 'subscribe', task_id: 'task_doesnotexist' })
    c.send({ type: 'submit', request_id: 'r-bad', task: { mode: 'batch' } })
    await vi.waitFor(() => expect(c.ofType('error')).toHaveLength(4), 15_000)
    const [notJson, unknown, missing, invalid] = c.ofType('error')
    expect(notJson).toMatchObject({ code: 'VALIDATION_FAILED' })
    expect(unknown).toMatchObject({ code: 'VALIDATION_FAILED' })
    expect(missing).toMatchObject({ code: 'NOT_FOUND' })
    expect(invalid).toMatchObject({ code: 'VALIDATION_FAILED', request_id: 'r-bad' })
    expect((invalid!.details!.issues as { path: string }[]).map((i) => i.path)).toEqual(
      expect.arrayContaining(['task.profile_id', 'task.prompt']),
    )
    c.send({ type: 'ping' })
    await c.next('pong')
    expect(c.socket.readyState).toBe(WebSocket.OPEN)
    c.socket.close()
  })
})

describe('subscriptions and submissions', () => {
  it('a client subscribing mid-task gets every event exactly once, in order, then the final status', async () => {
    const sub = await t.submit({ prompt: 'Stream. [[berth:slow 60]] [[berth:turns 3]] [[berth:text the end]]' })
    // Join once the task has visibly started: history and live must meet without a gap.
    await vi.waitFor(async () => expect((await t.events(sub.task_id)).length).toBeGreaterThan(3), 30_000)
    const c = await connect()
    c.send({ type: 'subscribe', task_id: sub.task_id })
    await c.next('task.status', (m) => ['completed', 'failed'].includes(m.status), 60_000)
    const got = c.ofType('task.event').map((m) => m.event)
    const stored = await t.events(sub.task_id)
    expect(stored.at(-1)!.type).toBe('result')
    expect(got.map((e) => e.seq)).toEqual(stored.map((e) => e.seq))
    expect(got).toEqual(stored)
    // Another caller cannot subscribe to it.
    const { token: other } = await t.s.user('Other')
    const o = await connect({ token: other })
    o.send({ type: 'subscribe', task_id: sub.task_id })
    expect(await o.next('error')).toMatchObject({ code: 'NOT_FOUND' })
    c.socket.close()
    o.socket.close()
  })

  it('a resent submit, on the same socket or after reconnecting, creates one task', async () => {
    const prompt = `Exactly once ${Date.now()}`
    const task = { mode: 'batch', profile_id: t.profileId, prompt }
    const c = await connect()
    c.send({ type: 'submit', request_id: 'req-1', task })
    c.send({ type: 'submit', request_id: 'req-1', task })
    await vi.waitFor(() => expect(c.ofType('submitted')).toHaveLength(2), 15_000)
    const [a, b] = c.ofType('submitted') as [Message<'submitted'>, Message<'submitted'>]
    expect(a.task_id).toMatch(/^task_/)
    expect(b.task_id).toBe(a.task_id)
    // The submitter is subscribed: it sees the task through to the end.
    await c.next('task.status', (m) => m.status === 'completed' && m.task_id === a.task_id, 60_000)
    c.socket.close()

    const again = await connect()
    again.send({ type: 'submit', request_id: 'req-1', task })
    expect((await again.next('submitted')).task_id).toBe(a.task_id)
    again.socket.close()
    const list = await t.api.tasks.list({ query: { limit: 100 } })
    expect(list.tasks.filter((x) => x.prompt === prompt)).toHaveLength(1)
    // The same request_id from another caller is a different request.
    const { token: other } = await t.s.user('Another')
    const theirs = await connect({ token: other })
    theirs.send({ type: 'submit', request_id: 'req-1', task })
    expect(await theirs.next('error')).toMatchObject({ code: 'VALIDATION_FAILED', request_id: 'req-1' })
    theirs.socket.close()
  })
})
