/**
 * Limits and protocol after the audit: RateLimit headers on every /v1 answer (failed
 * authentication counted per client address), Retry-After on 429s, WebSocket messages
 * counted and large frames refused (1009), a client that aborts mid-body logged as such,
 * HEAD wherever GET, lengths in characters and names without control characters.
 */
import { connect as netConnect } from 'node:net'
import WebSocket from 'ws'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { SocketServerMessage } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'

/** One line of a test server's captured log. */
type LogEntry = { level: string; msg: string; status?: number }
const servers: TestServer[] = []
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close()
})
async function server(opts: Parameters<typeof startServer>[0] = {}) {
  const s = await startServer(opts)
  servers.push(s)
  return s
}

describe('rate limit headers', () => {
  it('come on every /v1 answer, 401, 403, 404 and 405 included, with a policy stating burst and rate', async () => {
    const s = await server({ rateLimit: { rpm: 60, burst: 10 } })
    const { token } = await s.user()
    const answers = [
      await s.request('/v1/profiles', { token }),
      await s.request('/v1/profiles'),
      await s.request('/v1/nowhere', { token }),
      await s.request('/v1/profiles', { method: 'PUT', token }),
      await s.request('/admin/users', { token }),
    ]
    expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 405, 403])
    for (const r of answers) {
      expect(r.headers.get('ratelimit-policy'), String(r.status)).toBe('10;w=10;burst=10;rpm=60')
      expect(r.headers.get('ratelimit-limit')).toBe('10')
      expect(r.headers.get('ratelimit-remaining')).toMatch(/^\d+$/)
    }
  })

  it('a failed authentication takes a token of the client address, so guessing keys is throttled', async () => {
    const s = await server({ rateLimit: { rpm: 60, burst: 3 } })
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push((await s.request('/v1/profiles', { token: `berth_sk_guess${i}` })).status)
    expect(statuses).toEqual([401, 401, 401, 429, 429])
    const refused = await s.request('/v1/profiles', { token: 'berth_sk_guess9' })
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(await refused.json()).toMatchObject({ code: 'RATE_LIMITED' })
    // A caller with a valid key has its own bucket.
    const { token } = await s.user()
    expect((await s.request('/v1/profiles', { token })).status).toBe(200)
  })
})

describe('WebSocket limits', () => {
  async function open(s: TestServer, token: string) {
    const socket = new WebSocket(`${s.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const messages: SocketServerMessage[] = []
    socket.on('message', (d) => messages.push(JSON.parse(String(d))))
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve())
      socket.once('error', reject)
    })
    return { socket, messages }
  }

  it('messages count against the caller’s rate limit', async () => {
    const s = await server({ rateLimit: { rpm: 60, burst: 4 } })
    const { token } = await s.user()
    const c = await open(s, token) // the upgrade takes one token
    for (let i = 0; i < 5; i++) c.socket.send(JSON.stringify({ type: 'ping' }))
    await vi.waitFor(() => expect(c.messages).toHaveLength(5), 15_000)
    expect(c.messages.filter((m) => m.type === 'pong')).toHaveLength(3)
    expect(c.messages.filter((m) => m.type === 'error')).toEqual([
      expect.objectContaining({ code: 'RATE_LIMITED' }),
      expect.objectContaining({ code: 'RATE_LIMITED' }),
    ])
    // HTTP requests share the same bucket.
    expect((await s.request('/v1/profiles', { token })).status).toBe(429)
    c.socket.close()
  })

  it('a frame over the JSON body limit closes the socket with 1009; a subscribe error names its task', async () => {
    const s = await server({ bodyLimit: 64 * 1024 })
    const { token } = await s.user()
    const c = await open(s, token)
    c.socket.send(JSON.stringify({ type: 'subscribe', task_id: 'task_doesnotexist' }))
    await vi.waitFor(
      () =>
        expect(c.messages).toEqual([
          expect.objectContaining({ type: 'error', code: 'NOT_FOUND', task_id: 'task_doesnotexist' }),
        ]),
      15_000,
    )
    const closed = new Promise<number>((r) => c.socket.once('close', (code) => r(code)))
    c.socket.send(JSON.stringify({ type: 'ping', pad: 'x'.repeat(65 * 1024) }))
    expect(await closed).toBe(1009)
  })
})

describe('aborted requests', () => {
  /** Send raw bytes and hang up. */
  async function abort(s: TestServer, raw: string) {
    const port = Number(new URL(s.url).port)
    await new Promise<void>((resolve) => {
      const socket = netConnect(port, '127.0.0.1', () => {
        socket.write(raw)
        // Real time is the point: the server must have started reading the body before the hang-up.
        setTimeout(() => {
          socket.destroy()
          resolve()
        }, 100)
      })
      socket.on('error', () => resolve())
    })
  }

  it('a client that hangs up mid-body, or sends a bad chunk size, is logged at info as a client abort', async () => {
    const s = await server()
    const { token } = await s.user()
    const head = (extra: string) =>
      `POST /v1/profiles HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n${extra}\r\n`
    await abort(s, `${head('Content-Length: 100\r\n')}{"name":`)
    await abort(s, `${head('Transfer-Encoding: chunked\r\n')}5\r\n{"nam\r\nZZ\r\nxx\r\n`)
    await vi.waitFor(() => expect(s.logs.filter((l) => l.includes('client aborted'))).toHaveLength(2), 15_000)
    const entries = s.logs.map((l) => JSON.parse(l) as LogEntry)
    expect(entries.filter((e) => e.level === 'error')).toEqual([])
    expect(entries.filter((e) => e.msg === 'request' && e.status === 500)).toEqual([])
    expect(entries.filter((e) => e.msg === 'client aborted').every((e) => e.level === 'info')).toBe(true)
  })
})

describe('HEAD, lengths and names', () => {
  it('HEAD answers wherever GET does, with GET’s status and headers and no body', async () => {
    const s = await server()
    const { token } = await s.user()
    for (const path of ['/health', '/openapi.json', '/v1/profiles', '/v1/profiles/prof_nothere']) {
      const get = await s.request(path, { token })
      const head = await s.request(path, { method: 'HEAD', token })
      expect(head.status, path).toBe(get.status)
      expect(head.headers.get('content-type'), path).toBe(get.headers.get('content-type'))
      expect(await head.text()).toBe('')
    }
  })

  it('counts string lengths in characters, and refuses names with control characters or lone surrogates', async () => {
    const s = await server()
    const { token } = await s.user()
    const create = (name: string) => clientFor(s, token).apiKeys.create({ body: { name, provider: 'stub' } })
    // 200 characters that are 400 UTF-16 units: within the 200-character limit.
    expect((await create('😀'.repeat(200))).name).toBe('😀'.repeat(200))
    expect((await failure(create('😀'.repeat(201)))).status).toBe(400)
    for (const bad of ['tab\there', 'bell\u0007', 'lone \ud800 high', 'lone \udc00 low', 'c1\u0085']) {
      const err = await failure(create(bad))
      expect(err.status, JSON.stringify(bad)).toBe(400)
      expect((err.details!.issues as { path: string }[])[0]?.path).toBe('name')
    }
  })
})
