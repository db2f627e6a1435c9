/**
 * The model gateway on a real unix socket, in front of the offline model (which checks the
 * key it receives) or a scripted upstream on loopback: the token is swapped for the real
 * key, answers stream through unchanged, usage and cost are metered from what the provider
 * returned, and tokens, models, paths and budgets are refused as they should be.
 */
import { linkSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createServer as createNetServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { costOf, priceOf, UNKNOWN_MODEL_PRICE } from '../src/broker/gateway-prices.js'
import { sseUsageReader } from '../src/broker/gateway-usage.js'
import {
  startModelGateway,
  type GatewayGrant,
  type ModelGateway,
  type ModelUsage,
} from '../src/broker/model-gateway.js'

const REAL_KEY = 'sk-ant-api03-REALKEY-gateway-test-0123456789'
const TOKEN = 'btk_task_one_capability_token'
const OTHER_TOKEN = 'btk_task_two_capability_token'

interface Reply {
  status: number
  headers: IncomingMessage['headers']
  text: string
}

/** One request to the gateway's socket; resolves with the whole answer. */
function call(
  socketPath: string,
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: unknown; raw?: string } = {},
): Promise<Reply> {
  const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body))
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path,
        method: opts.method ?? 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...opts.headers },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        )
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(payload)
  })
}

const withToken = (token: string) => ({ 'x-api-key': token })
const ask = (prompt: string, extra: Record<string, unknown> = {}) => ({
  model: 'claude-sonnet-4-5',
  max_tokens: 1024,
  messages: [{ role: 'user', content: prompt }],
  ...extra,
})

let dir: string
let stub: OfflineModelServer
/** A scripted upstream on loopback for what the offline model cannot do (cache tokens, held streams, redirects). */
let scripted: Server
let scriptedUrl: string
let onScripted: (req: IncomingMessage, res: ServerResponse, body: string) => void
let gateway: ModelGateway
let grants: Map<string, GatewayGrant>
let usages: { grant: GatewayGrant; usage: ModelUsage }[]

function grant(taskId: string, over: Partial<GatewayGrant> = {}): GatewayGrant {
  return {
    task_id: taskId,
    owner_id: 'usr_1',
    profile_id: 'prof_1',
    upstream: { base_url: stub.url, api_key: REAL_KEY },
    allowed_models: null,
    max_budget_usd: null,
    monthly_limits: [],
    ...over,
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-gateway-'))
  stub = await startOfflineModel({ apiKey: REAL_KEY })
  scripted = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => onScripted(req, res, Buffer.concat(chunks).toString('utf8')))
  })
  await new Promise<void>((resolve) => scripted.listen(0, '127.0.0.1', resolve))
  scriptedUrl = `http://127.0.0.1:${(scripted.address() as AddressInfo).port}`
})

afterAll(async () => {
  await stub.close()
  scripted.closeAllConnections()
  await new Promise<void>((resolve) => scripted.close(() => resolve()))
  rmSync(dir, { recursive: true, force: true })
})

beforeEach(async () => {
  stub.requests.length = 0
  grants = new Map([
    [TOKEN, grant('task_1')],
    [OTHER_TOKEN, grant('task_2')],
  ])
  usages = []
  gateway = await startModelGateway({
    socketPath: join(dir, 'model.sock'),
    authorize: async (token) => grants.get(token) ?? null,
    onUsage: (g, usage) => {
      usages.push({ grant: g, usage })
    },
  })
})

afterEach(async () => {
  await gateway.close()
})

describe('the capability token', () => {
  it('is swapped for the real key: the offline model, which checks it, answers', async () => {
    const r = await call(gateway.socketPath, '/v1/messages?beta=true', {
      headers: withToken(TOKEN),
      body: ask('[[berth:text Hello through the gateway]]'),
    })
    expect(r.status).toBe(200)
    expect(JSON.parse(r.text).content).toEqual([{ type: 'text', text: 'Hello through the gateway' }])
    expect(stub.requests).toHaveLength(1)
    const seen = stub.requests[0]!
    expect(seen.url).toBe('/v1/messages?beta=true')
    expect(seen.headers['x-api-key']).toBe(REAL_KEY)
    expect(seen.headers['anthropic-version']).toBe('2023-06-01')
    expect(JSON.stringify(seen.headers)).not.toContain(TOKEN)
  })

  it('is also read from Authorization: Bearer, which is not forwarded', async () => {
    const r = await call(gateway.socketPath, '/v1/messages', {
      headers: { authorization: `Bearer ${TOKEN}` },
      body: ask('hi'),
    })
    expect(r.status).toBe(200)
    expect(stub.requests[0]!.headers['x-api-key']).toBe(REAL_KEY)
    expect(stub.requests[0]!.headers.authorization).toBeUndefined()
  })

  it('missing or unknown is a 401 in Anthropic’s error shape, and the provider sees nothing', async () => {
    for (const headers of [
      {} as Record<string, string>,
      withToken('btk_forged'),
      { authorization: 'Bearer btk_forged' },
    ]) {
      const r = await call(gateway.socketPath, '/v1/messages', { headers, body: ask('hi') })
      expect(r.status).toBe(401)
      expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
    }
    expect(stub.requests).toHaveLength(0)
  })

  it('is refused as soon as authorize stops honouring it (nothing is cached)', async () => {
    const first = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(first.status).toBe(200)
    grants.delete(TOKEN)
    const after = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(after.status).toBe(401)
    expect(stub.requests).toHaveLength(1)
  })
})

describe('what is forwarded', () => {
  it('refuses paths outside the Messages and Models APIs with a 404', async () => {
    const refused = [
      ['POST', '/v1/messages/batches'],
      ['GET', '/v1/files'],
      ['GET', '/v1/messages'],
      ['POST', '/v1/complete'],
      ['GET', '/admin/users'],
      ['POST', '/v1/messages/../messages/batches'],
    ]
    for (const [method, path] of refused) {
      const body = method === 'POST' ? ask('hi') : undefined
      const r = await call(gateway.socketPath, path!, { method, headers: withToken(TOKEN), body })
      expect(r.status, `${method} ${path}`).toBe(404)
      expect(JSON.parse(r.text).error.type).toBe('not_found_error')
    }
    expect(stub.requests).toHaveLength(0)
  })

  it('forwards count_tokens and the model list', async () => {
    const count = await call(gateway.socketPath, '/v1/messages/count_tokens', {
      headers: withToken(TOKEN),
      body: ask('count me'),
    })
    expect(count.status).toBe(200)
    expect(JSON.parse(count.text).input_tokens).toBeGreaterThan(0)
    const models = await call(gateway.socketPath, '/v1/models', { method: 'GET', headers: withToken(TOKEN) })
    expect(models.status).toBe(200)
    expect(JSON.parse(models.text).data.length).toBeGreaterThan(0)
    expect(stub.requests.map((r) => r.headers['x-api-key'])).toEqual([REAL_KEY, REAL_KEY])
    // Counting tokens costs nothing and is not metered.
    expect(gateway.usage('task_1')).toBeUndefined()
  })

  it('refuses a model outside allowed_models with a 403 naming it, before the provider sees anything', async () => {
    grants.set(TOKEN, grant('task_1', { allowed_models: ['claude-haiku-*'] }))
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const r = await call(gateway.socketPath, path, { headers: withToken(TOKEN), body: ask('hi') })
      expect(r.status).toBe(403)
      const error = JSON.parse(r.text).error
      expect(error.type).toBe('permission_error')
      expect(error.message).toContain('claude-sonnet-4-5')
    }
    expect(stub.requests).toHaveLength(0)
    const allowed = await call(gateway.socketPath, '/v1/messages', {
      headers: withToken(TOKEN),
      body: ask('hi', { model: 'claude-haiku-4-5' }),
    })
    expect(allowed.status).toBe(200)
    expect(stub.requests).toHaveLength(1)
  })

  it('forwards the body it checked: of two "model" keys, the provider gets only the one that was allowed', async () => {
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: scriptedUrl, api_key: REAL_KEY } }))
    grants.get(TOKEN)!.allowed_models = ['claude-haiku-*']
    let received = ''
    onScripted = (_req, res, body) => {
      received = body
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    }
    const raw = '{"model":"claude-opus-4-1","model":"claude-haiku-4-5","max_tokens":5,"messages":[]}'
    const r = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), raw })
    expect(r.status).toBe(200)
    expect(received).not.toContain('opus')
    expect(JSON.parse(received).model).toBe('claude-haiku-4-5')
  })

  it('refuses a body that is not a JSON object (400) or is over the limit (413)', async () => {
    await gateway.close()
    gateway = await startModelGateway({
      socketPath: join(dir, 'model.sock'),
      authorize: async (token) => grants.get(token) ?? null,
      maxBodyBytes: 1024,
    })
    const bad = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), raw: 'not json' })
    expect(bad.status).toBe(400)
    expect(JSON.parse(bad.text).error.type).toBe('invalid_request_error')
    const big = await call(gateway.socketPath, '/v1/messages', {
      headers: withToken(TOKEN),
      body: ask('x'.repeat(4096)),
    })
    expect(big.status).toBe(413)
    expect(JSON.parse(big.text).error.type).toBe('request_too_large')
    expect(stub.requests).toHaveLength(0)
  })

  it('passes the provider’s errors through unchanged', async () => {
    const direct = await fetch(`${stub.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': REAL_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(ask('[[berth:error overloaded]]')),
    })
    const r = await call(gateway.socketPath, '/v1/messages', {
      headers: withToken(TOKEN),
      body: ask('[[berth:error overloaded]]'),
    })
    expect(r.status).toBe(529)
    expect(r.text).toBe(await direct.text())
    expect(gateway.usage('task_1')).toBeUndefined()
  })

  it('hands the client a compressed answer decoded, and meters it', async () => {
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: scriptedUrl, api_key: REAL_KEY } }))
    const answer = { type: 'message', model: 'claude-haiku-4-5', usage: { input_tokens: 11, output_tokens: 22 } }
    let seen: IncomingMessage['headers'] = {}
    onScripted = (req, res) => {
      seen = req.headers
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
      res.end(gzipSync(JSON.stringify(answer)))
    }
    const r = await call(gateway.socketPath, '/v1/messages', {
      headers: { ...withToken(TOKEN), 'accept-encoding': 'identity', connection: 'keep-alive, x-hop', 'x-hop': '1' },
      body: ask('hi'),
    })
    expect(r.status).toBe(200)
    expect(r.headers['content-encoding']).toBeUndefined()
    expect(JSON.parse(r.text)).toEqual(answer)
    // The gateway negotiates compression with the provider itself, and drops the headers the client's connection named.
    expect(seen['accept-encoding']).toContain('gzip')
    expect(seen['x-hop']).toBeUndefined()
    expect(gateway.usage('task_1')).toMatchObject({ requests: 1, input_tokens: 11, output_tokens: 22 })
  })

  it('answers 500 in the error shape when authorize fails', async () => {
    await gateway.close()
    gateway = await startModelGateway({
      socketPath: join(dir, 'model.sock'),
      authorize: async () => {
        throw new Error('store down')
      },
    })
    const r = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(r.status).toBe(500)
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'api_error' } })
    expect(stub.requests).toHaveLength(0)
  })

  it('does not follow a redirect (the key would go with it): the client gets the 307', async () => {
    let followed = false
    const elsewhere = createServer((_req, res) => {
      followed = true
      res.end()
    })
    await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve))
    const target = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/v1/messages`
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: scriptedUrl, api_key: REAL_KEY } }))
    onScripted = (_req, res) => res.writeHead(307, { location: target }).end()
    const r = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(r.status).toBe(307)
    expect(r.headers.location).toBe(target)
    expect(followed).toBe(false)
    await new Promise<void>((resolve) => elsewhere.close(() => resolve()))
  })

  it('answers 502 in the error shape when the provider cannot be reached', async () => {
    const closed = createNetServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: `http://127.0.0.1:${port}`, api_key: REAL_KEY } }))
    const r = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(r.status).toBe(502)
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'api_error' } })
  })
})

describe('streaming', () => {
  it('arrives as the same SSE bytes the provider sent, and its usage is metered', async () => {
    const body = ask('[[berth:text Streamed words, one after another]] [[berth:usage input=120 output=45]]', {
      stream: true,
    })
    const direct = await fetch(`${stub.url}/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'x-api-key': REAL_KEY, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const r = await call(gateway.socketPath, '/v1/messages?beta=true', { headers: withToken(TOKEN), body })
    expect(r.status).toBe(200)
    expect(r.headers['content-type']).toBe('text/event-stream')
    expect(r.text).toContain('event: message_start')
    expect(r.text).toBe(await direct.text())
    const expected = {
      input_tokens: 120,
      output_tokens: 45,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    }
    expect(usages).toHaveLength(1)
    expect(usages[0]!.grant.task_id).toBe('task_1')
    expect(usages[0]!.usage).toMatchObject({ model: 'claude-sonnet-4-5', ...expected })
    expect(usages[0]!.usage.cost_usd).toBeCloseTo((120 * 3 + 45 * 15) / 1e6, 12)
    expect(gateway.usage('task_1')).toMatchObject({ requests: 1, ...expected })
    expect(gateway.usage('task_2')).toBeUndefined()
  })

  it('passes each event on as it comes: the provider holds the stream open until the client has the first', async () => {
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: scriptedUrl, api_key: REAL_KEY } }))
    let release!: () => void
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    const start = {
      type: 'message_start',
      message: {
        model: 'claude-sonnet-4-5',
        usage: { input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 2000, cache_read_input_tokens: 3000 },
      },
    }
    const delta = { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 77 } }
    onScripted = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`event: message_start\ndata: ${JSON.stringify(start)}\n\n`)
      await released
      res.end(`event: message_delta\ndata: ${JSON.stringify(delta)}\n\nevent: message_stop\ndata: {}\n\n`)
    }
    const text = await new Promise<string>((resolve, reject) => {
      const req = request(
        { socketPath: gateway.socketPath, path: '/v1/messages', method: 'POST', headers: withToken(TOKEN) },
        (res) => {
          let all = ''
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            all += chunk
            if (all.includes('message_start')) release()
          })
          res.on('end', () => resolve(all))
        },
      )
      req.on('error', reject)
      req.end(JSON.stringify(ask('hi', { stream: true })))
    })
    expect(text).toContain('message_stop')
    expect(gateway.usage('task_1')).toMatchObject({
      requests: 1,
      input_tokens: 10,
      output_tokens: 77,
      cache_creation_input_tokens: 2000,
      cache_read_input_tokens: 3000,
    })
    expect(gateway.usage('task_1')!.cost_usd).toBeCloseTo((10 * 3 + 77 * 15 + 2000 * 3.75 + 3000 * 0.3) / 1e6, 12)
  })

  it('aborts the provider’s stream when the client goes away', async () => {
    grants.set(TOKEN, grant('task_1', { upstream: { base_url: scriptedUrl, api_key: REAL_KEY } }))
    const upstreamClosed = new Promise<void>((resolve) => {
      onScripted = (_req, res) => {
        res.on('close', () => resolve())
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write('event: ping\ndata: {"type":"ping"}\n\n')
      }
    })
    const req = request(
      { socketPath: gateway.socketPath, path: '/v1/messages', method: 'POST', headers: withToken(TOKEN) },
      (res) => res.once('data', () => req.destroy()),
    )
    req.on('error', () => {})
    req.end(JSON.stringify(ask('hi', { stream: true })))
    await upstreamClosed
  })
})

describe('budgets and totals', () => {
  it('refuses further model calls once the task’s budget is spent', async () => {
    grants.set(TOKEN, grant('task_1', { max_budget_usd: 0.01 }))
    const prompt = '[[berth:usage input=1000 output=1000]]'
    const first = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask(prompt) })
    expect(first.status).toBe(200)
    // 1000 × $3 + 1000 × $15 per million tokens = $0.018, over the $0.01 budget.
    expect(gateway.usage('task_1')!.cost_usd).toBeCloseTo(0.018, 12)
    const second = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask(prompt) })
    expect(second.status).toBe(400)
    expect(JSON.parse(second.text).error.message).toMatch(/budget.*spent/)
    expect(stub.requests).toHaveLength(1)
    // Another task's budget is its own.
    const other = await call(gateway.socketPath, '/v1/messages', { headers: withToken(OTHER_TOKEN), body: ask(prompt) })
    expect(other.status).toBe(200)
  })

  it('refuses model calls while the grant says a monthly limit is spent, naming it', async () => {
    const spent = { scope: 'profile' as const, limit: 0.05, spent: 0.06, resets_at: '2026-12-01T00:00:00.000Z' }
    grants.set(TOKEN, grant('task_1', { monthly_limits: [spent] }))
    const refused = await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('hi') })
    expect(refused.status).toBe(400)
    expect(JSON.parse(refused.text).error.message).toMatch(/profile's monthly spending limit of \$0.05 is spent/)
    expect(stub.requests).toHaveLength(0)
    // The model list is not metered: still answered.
    expect((await call(gateway.socketPath, '/v1/models', { method: 'GET', headers: withToken(TOKEN) })).status).toBe(
      200,
    )
  })

  it('keeps totals per task until forgotten', async () => {
    await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('[[berth:usage input=5]]') })
    await call(gateway.socketPath, '/v1/messages', { headers: withToken(TOKEN), body: ask('[[berth:usage input=7]]') })
    await call(gateway.socketPath, '/v1/messages', { headers: withToken(OTHER_TOKEN), body: ask('hi') })
    expect(gateway.usage('task_1')).toMatchObject({ requests: 2, input_tokens: 12 })
    expect(gateway.usage('task_2')).toMatchObject({ requests: 1 })
    gateway.forget('task_1')
    expect(gateway.usage('task_1')).toBeUndefined()
    expect(gateway.usage('task_2')).toMatchObject({ requests: 1 })
  })
})

describe('the socket', () => {
  it('is world-writable and replaces a stale socket file, but never a regular file', async () => {
    expect(statSync(gateway.socketPath).mode & 0o777).toBe(0o666)
    // A socket left by a process that died: nothing answers on it. (Node removes a socket
    // file when its server closes, so a second link to it is what stays behind.)
    const stale = join(dir, 'stale.sock')
    const dead = createNetServer()
    await new Promise<void>((resolve) => dead.listen(join(dir, 'dead.sock'), resolve))
    linkSync(join(dir, 'dead.sock'), stale)
    await new Promise<void>((resolve) => dead.close(() => resolve()))
    expect(statSync(stale).isSocket()).toBe(true)
    const again = await startModelGateway({ socketPath: stale, authorize: async () => null })
    await again.close()
    const file = join(dir, 'file.sock')
    writeFileSync(file, 'not a socket')
    await expect(startModelGateway({ socketPath: file, authorize: async () => null })).rejects.toThrow(/not a socket/)
    await expect(startModelGateway({ socketPath: gateway.socketPath, authorize: async () => null })).rejects.toThrow(
      /another process listens/,
    )
  })
})

describe('prices and usage parsing', () => {
  it('prices each family, cache writes by lifetime, and an unknown model at the dearest rate', () => {
    expect(priceOf('claude-opus-4-5-20251101')?.input).toBe(5)
    expect(priceOf('claude-opus-4-1')?.output).toBe(75)
    expect(priceOf('claude-haiku-4-5')?.cache_read).toBeCloseTo(0.1, 12)
    expect(priceOf('gpt-4o')).toBeUndefined()
    const usage = {
      input_tokens: 0,
      output_tokens: 0,
      cache_creation_input_tokens: 1_000_000,
      cache_read_input_tokens: 0,
      cache_creation: { ephemeral_5m_input_tokens: 400_000, ephemeral_1h_input_tokens: 600_000 },
    }
    expect(costOf('claude-sonnet-4-5', usage)).toBeCloseTo(0.4 * 3.75 + 0.6 * 6, 12)
    const million = { ...usage, cache_creation_input_tokens: 0, cache_creation: undefined, input_tokens: 1_000_000 }
    expect(costOf('some-new-model', million)).toBe(UNKNOWN_MODEL_PRICE.input)
  })

  it('reads SSE usage however the bytes are split, multi-byte characters included', () => {
    const sse = [
      `event: message_start\ndata: {"type":"message_start","message":{"model":"claude-haiku-4-5","usage":{"input_tokens":9,"cache_read_input_tokens":4,"output_tokens":1}}}\n\n`,
      `event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"héllo ✓ usage"}}\n\n`,
      `event: message_delta\r\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\r\n\r\n`,
      `event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":8,"server_tool_use":{"web_search_requests":2}}}\n\n`,
    ].join('')
    const bytes = new TextEncoder().encode(sse)
    for (const size of [1, 3, 7, 64, bytes.length]) {
      const reader = sseUsageReader()
      for (let i = 0; i < bytes.length; i += size) reader.push(bytes.subarray(i, i + size))
      expect(reader.end(), `chunks of ${size}`).toEqual({
        model: 'claude-haiku-4-5',
        usage: {
          input_tokens: 9,
          output_tokens: 8,
          cache_creation_input_tokens: 0,
          cache_read_input_tokens: 4,
          web_search_requests: 2,
        },
      })
    }
  })
})
