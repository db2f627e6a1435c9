/**
 * The model gateway in front of Amazon Bedrock and Google Vertex AI, on a real unix socket,
 * against local fakes that speak each provider's protocol and check its authentication
 * (`@berth/testkit/providers`): the gateway signs every Bedrock request with SigV4 and mints
 * Vertex access tokens from a service account key (both made at test time), maps the
 * profile's model ids to the provider's, checks the model the path names, passes the
 * answer through unchanged and meters it (Bedrock's event-stream framing included), ending a
 * stream that passes a budget in the provider's own framing.
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventStreamCodec } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { startFakeBedrock, startFakeVertex, type FakeBedrock, type FakeVertex } from '@berth/testkit/providers'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import {
  startModelGateway,
  type GatewayGrant,
  type ModelGateway,
  type ModelUsage,
} from '../src/broker/model-gateway.js'
import { eventStreamUsageReader } from '../src/broker/providers/bedrock-stream.js'

const TOKEN = 'btk_cloud_gateway_token'
const AWS = {
  accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
  secretAccessKey: randomBytes(30).toString('base64'),
  sessionToken: `IQoJb3JpZ2luX2Vj${randomBytes(40).toString('base64')}`,
}
const SONNET_BEDROCK = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
const HAIKU_BEDROCK = 'us.anthropic.claude-haiku-4-5-20251001-v1:0'
const SONNET_VERTEX = 'claude-sonnet-4-5@20250929'
const PROJECT = 'berth-test-project'
/** A million input tokens ($3) and 100,000 output tokens ($1.50) on Sonnet, slowly. */
const DEAR = '[[berth:usage input=1000000 output=100000]] [[berth:slow 3000]]'
const DEAR_CALL = 4.5
const REGION = 'us-east5'

const EMAIL = 'berth@berth-test-project.iam.gserviceaccount.com'
const rsa = () => generateKeyPairSync('rsa', { modulusLength: 2048 })

/** A service account key as Google issues it (PKCS#8 PEM), for a key pair made now. */
function serviceAccount(privateKey: KeyObject, tokenUri: string) {
  return {
    type: 'service_account' as const,
    project_id: PROJECT,
    private_key_id: randomBytes(20).toString('hex'),
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    client_email: EMAIL,
    token_uri: tokenUri,
  }
}

interface Reply {
  status: number
  headers: Record<string, string | string[] | undefined>
  bytes: Buffer
}

function call(socketPath: string, path: string, body: unknown, accept = 'application/json'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept, authorization: `Bearer ${TOKEN}` },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }),
        )
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

/** The messages of an event-stream answer: their type header and JSON payload. */
function frames(bytes: Buffer): { type: string; exception?: string; payload: Record<string, unknown> }[] {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  const out: { type: string; exception?: string; payload: Record<string, unknown> }[] = []
  for (let at = 0; at < bytes.length; ) {
    const total = bytes.readUInt32BE(at)
    const { headers, body } = codec.decode(bytes.subarray(at, at + total))
    const exception = headers[':exception-type']?.value
    out.push({
      type: String(headers[':message-type']?.value),
      ...(exception !== undefined && { exception: String(exception) }),
      payload: JSON.parse(toUtf8(body)),
    })
    at += total
  }
  return out
}

/** The Messages API events in an event-stream answer, decoded as Claude Code's Bedrock client would. */
const events = (bytes: Buffer): { type: string }[] =>
  frames(bytes)
    .filter((f) => f.type === 'event')
    .map((f) => JSON.parse(Buffer.from(String(f.payload.bytes), 'base64').toString('utf8')))

const bedrockBody = (prompt: string) => ({
  anthropic_version: 'bedrock-2023-05-31',
  max_tokens: 100,
  messages: [{ role: 'user', content: prompt }],
})
const vertexBody = (prompt: string, stream = true) => ({
  anthropic_version: 'vertex-2023-10-16',
  max_tokens: 100,
  stream,
  messages: [{ role: 'user', content: prompt }],
})
const vertexPath = (model: string, action = 'streamRawPredict') =>
  `/v1/projects/agent-said-project/locations/agent-said-region/publishers/anthropic/models/${model}:${action}`

let dir: string
let bedrock: FakeBedrock
let vertex: FakeVertex
let account: ReturnType<typeof serviceAccount>
/** The same account's name on a key the token endpoint does not know. */
let stranger: ReturnType<typeof serviceAccount>
let gateway: ModelGateway
let grant: GatewayGrant
let usages: ModelUsage[]

const base = { task_id: 'task_1', owner_id: 'usr_1', profile_id: 'prof_1', monthly_limits: [] }
const bedrockGrant = (over: Partial<GatewayGrant['upstream']> = {}, rest: Partial<GatewayGrant> = {}) =>
  ({
    ...base,
    upstream: {
      provider: 'bedrock',
      base_url: bedrock.url,
      region: 'us-east-1',
      access_key_id: AWS.accessKeyId,
      secret_access_key: AWS.secretAccessKey,
      session_token: AWS.sessionToken,
      ...over,
    },
    model_map: { 'claude-sonnet-4-5': SONNET_BEDROCK, 'claude-haiku-4-5': HAIKU_BEDROCK },
    allowed_models: ['claude-sonnet-*', 'claude-haiku-*'],
    max_budget_usd: null,
    ...rest,
  }) as GatewayGrant
const vertexGrant = (key = account): GatewayGrant => ({
  ...base,
  upstream: { provider: 'vertex', base_url: vertex.baseUrl, project_id: PROJECT, region: REGION, service_account: key },
  model_map: { 'claude-sonnet-4-5': SONNET_VERTEX },
  allowed_models: ['claude-sonnet-*'],
  max_budget_usd: null,
})

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-gateway-cloud-'))
  bedrock = await startFakeBedrock({ credentials: AWS, region: 'us-east-1', models: [SONNET_BEDROCK, HAIKU_BEDROCK] })
  const keys = rsa()
  vertex = await startFakeVertex({
    accounts: [{ client_email: EMAIL, public_key: keys.publicKey }],
    projectId: PROJECT,
    region: REGION,
    models: [SONNET_VERTEX],
  })
  account = serviceAccount(keys.privateKey, vertex.tokenUri)
  stranger = serviceAccount(rsa().privateKey, vertex.tokenUri)
})

afterAll(async () => {
  await bedrock.close()
  await vertex.close()
  rmSync(dir, { recursive: true, force: true })
})

beforeEach(async () => {
  bedrock.requests.length = 0
  vertex.requests.length = 0
  vertex.issueExpired(false)
  usages = []
  gateway = await startModelGateway({
    socketPath: join(dir, 'model.sock'),
    authorize: async (token) => (token === TOKEN ? grant : null),
    onUsage: (_g, usage) => usages.push(usage),
  })
})

afterEach(async () => {
  await gateway.close()
})

describe('Bedrock', () => {
  it('signs each request with SigV4, asks for the mapped model and meters the event stream it passes through', async () => {
    grant = bedrockGrant()
    const r = await call(
      gateway.socketPath,
      '/model/claude-sonnet-4-5/invoke-with-response-stream',
      bedrockBody('[[berth:text Hello from Bedrock]]'),
      'application/vnd.amazon.eventstream',
    )
    expect(r.status).toBe(200)
    expect(r.headers['content-type']).toBe('application/vnd.amazon.eventstream')
    const got = events(r.bytes)
    expect(got.map((e) => e.type)).toContain('message_delta')
    expect(JSON.stringify(got)).toContain('Hello from Bedrock')
    expect(bedrock.requests).toHaveLength(1)
    const seen = bedrock.requests[0]!
    expect(seen).toMatchObject({ signed: true, status: 200, model: SONNET_BEDROCK })
    expect(seen.headers['x-amz-security-token']).toBe(AWS.sessionToken)
    expect(JSON.stringify(seen.headers)).not.toContain(TOKEN)
    expect(JSON.stringify(seen.headers)).not.toContain(AWS.secretAccessKey)
    expect(usages).toHaveLength(1)
    expect(usages[0]).toMatchObject({ model: 'claude-sonnet-4-5-20250929' })
    expect(usages[0]!.output_tokens).toBeGreaterThan(0)
    expect(usages[0]!.cost_usd).toBeGreaterThan(0)
  })

  it('meters an unstreamed invoke, and reads a provider id in the path back to the profile’s name to check it', async () => {
    grant = bedrockGrant()
    const path = `/model/${encodeURIComponent(HAIKU_BEDROCK)}/invoke`
    const r = await call(gateway.socketPath, path, bedrockBody('[[berth:text Plain JSON]]'))
    expect(r.status).toBe(200)
    expect(JSON.parse(r.bytes.toString()).content).toEqual([{ type: 'text', text: 'Plain JSON' }])
    expect(bedrock.requests[0]).toMatchObject({ signed: true, model: HAIKU_BEDROCK })
    expect(usages[0]).toMatchObject({ model: 'claude-haiku-4-5-20251001' })
  })

  it('refuses a model the credential does not allow before Bedrock is asked', async () => {
    grant = bedrockGrant()
    const r = await call(gateway.socketPath, '/model/claude-opus-4-5/invoke', bedrockBody('hi'))
    expect(r.status).toBe(403)
    expect(JSON.parse(r.bytes.toString()).error.type).toBe('permission_error')
    expect(bedrock.requests).toHaveLength(0)
  })

  it('a wrong secret is refused by Bedrock (InvalidSignatureException), passed back as it came and not metered', async () => {
    grant = bedrockGrant({ secret_access_key: randomBytes(30).toString('base64') })
    const r = await call(gateway.socketPath, '/model/claude-sonnet-4-5/invoke', bedrockBody('hi'))
    expect(r.status).toBe(403)
    expect(r.headers['x-amzn-errortype']).toMatch(/^InvalidSignatureException/)
    expect(bedrock.requests[0]).toMatchObject({ signed: false })
    expect(usages).toHaveLength(0)
  })

  it('keeps a task within its budget from metered Bedrock answers', async () => {
    grant = bedrockGrant({}, { max_budget_usd: 0.000001 })
    const first = await call(gateway.socketPath, '/model/claude-sonnet-4-5/invoke', bedrockBody('hi'))
    expect(first.status).toBe(200)
    const second = await call(gateway.socketPath, '/model/claude-sonnet-4-5/invoke', bedrockBody('hi'))
    expect(second.status).toBe(400)
    expect(JSON.parse(second.bytes.toString()).error.message).toMatch(/budget/)
    expect(bedrock.requests).toHaveLength(1)
  })

  it('ends a dear stream at the task’s budget with an exception message, between two whole messages', async () => {
    grant = bedrockGrant({}, { max_budget_usd: 0.5 })
    const r = await call(
      gateway.socketPath,
      '/model/claude-sonnet-4-5/invoke-with-response-stream',
      bedrockBody(`Spend. ${DEAR}`),
      'application/vnd.amazon.eventstream',
    )
    expect(r.status).toBe(200)
    const got = frames(r.bytes)
    const last = got.at(-1)!
    expect(last).toMatchObject({ type: 'exception', exception: 'validationException' })
    expect(String(last.payload.message)).toMatch(/this task's budget of \$0.5 is spent/)
    expect(events(r.bytes).map((e) => e.type)).not.toContain('message_stop')
    const spent = gateway.usage('task_1')!.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.5)
    expect(spent).toBeLessThan(DEAR_CALL)
    const next = await call(gateway.socketPath, '/model/claude-sonnet-4-5/invoke', bedrockBody('Again.'))
    expect(next.status).toBe(400)
    expect(bedrock.requests).toHaveLength(1)
  })

  it('reads usage from an event stream however its bytes are split', () => {
    const codec = new EventStreamCodec(toUtf8, fromUtf8)
    const frame = (event: object) =>
      codec.encode({
        headers: {
          ':event-type': { type: 'string', value: 'chunk' },
          ':message-type': { type: 'string', value: 'event' },
        },
        body: fromUtf8(JSON.stringify({ bytes: Buffer.from(JSON.stringify(event)).toString('base64') })),
      })
    const stream = Buffer.concat([
      frame({ type: 'message_start', message: { model: 'claude-x', usage: { input_tokens: 7, output_tokens: 1 } } }),
      frame({ type: 'message_delta', usage: { output_tokens: 42 } }),
    ])
    for (const size of [1, 3, 17, stream.length]) {
      const reader = eventStreamUsageReader()
      for (let at = 0; at < stream.length; at += size) reader.push(stream.subarray(at, at + size))
      expect(reader.end()).toMatchObject({ model: 'claude-x', usage: { input_tokens: 7, output_tokens: 42 } })
    }
  })
})

describe('Vertex AI', () => {
  it('mints a token from the key (JWT-bearer), reuses it, and sends the mapped model to the credential’s project and region', async () => {
    grant = vertexGrant()
    for (const text of ['First', 'Second']) {
      const r = await call(
        gateway.socketPath,
        vertexPath('claude-sonnet-4-5'),
        vertexBody(`[[berth:text ${text}]]`),
        'text/event-stream',
      )
      expect(r.status).toBe(200)
      expect(r.bytes.toString()).toContain(text)
    }
    const tokenCalls = vertex.requests.filter((q) => q.path === '/token')
    expect(tokenCalls).toHaveLength(1)
    const predicts = vertex.requests.filter((q) => q.path !== '/token')
    expect(predicts.map((q) => q.path)).toEqual([
      `/v1/projects/${PROJECT}/locations/${REGION}/publishers/anthropic/models/${SONNET_VERTEX}:streamRawPredict`,
      `/v1/projects/${PROJECT}/locations/${REGION}/publishers/anthropic/models/${SONNET_VERTEX}:streamRawPredict`,
    ])
    expect(predicts.every((q) => q.status === 200 && q.token === vertex.issuedTokens()[0])).toBe(true)
    expect(usages.map((u) => u.model)).toEqual(['claude-sonnet-4-5-20250929', 'claude-sonnet-4-5-20250929'])
  })

  it('ends a dear stream at the task’s budget with an error event', async () => {
    grant = { ...vertexGrant(), max_budget_usd: 0.5 }
    const r = await call(gateway.socketPath, vertexPath('claude-sonnet-4-5'), vertexBody(`Spend. ${DEAR}`))
    expect(r.status).toBe(200)
    const text = r.bytes.toString()
    expect(text).toContain('event: error')
    expect(text).toMatch(/this task's budget of \$0.5 is spent/)
    expect(text).not.toContain('message_stop')
    expect(gateway.usage('task_1')!.cost_usd).toBeLessThan(DEAR_CALL)
  })

  it('counts tokens with the body’s model mapped, unmetered', async () => {
    grant = vertexGrant()
    const r = await call(gateway.socketPath, vertexPath('count-tokens', 'rawPredict'), {
      ...vertexBody('count me', false),
      model: 'claude-sonnet-4-5',
    })
    expect(r.status).toBe(200)
    expect(JSON.parse(r.bytes.toString()).input_tokens).toBeGreaterThan(0)
    expect(vertex.requests.at(-1)!.body).toMatchObject({ model: SONNET_VERTEX })
    expect(usages).toHaveLength(0)
  })

  it('a key the token endpoint refuses is a 401 from the gateway; Vertex itself is never asked', async () => {
    grant = vertexGrant(stranger)
    const r = await call(gateway.socketPath, vertexPath('claude-sonnet-4-5'), vertexBody('hi'))
    expect(r.status).toBe(401)
    const err = JSON.parse(r.bytes.toString())
    expect(err).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
    expect(err.error.message).toContain('Invalid JWT Signature')
    expect(vertex.requests.map((q) => q.path)).toEqual(['/token'])
  })

  it('a token Vertex refuses (expired early) is replaced by a new one, once', async () => {
    grant = vertexGrant()
    expect((await call(gateway.socketPath, vertexPath('claude-sonnet-4-5'), vertexBody('one'))).status).toBe(200)
    vertex.expireTokens()
    expect((await call(gateway.socketPath, vertexPath('claude-sonnet-4-5'), vertexBody('two'))).status).toBe(200)
    expect(vertex.requests.filter((q) => q.path === '/token')).toHaveLength(2)
    expect(vertex.requests.filter((q) => q.refused === 'expired token')).toHaveLength(1)
  })

  it('tokens that are expired when issued end in Vertex’s 401, passed back after the one retry', async () => {
    grant = vertexGrant(account)
    vertex.issueExpired(true)
    const r = await call(gateway.socketPath, vertexPath('claude-sonnet-4-5'), vertexBody('hi'))
    expect(r.status).toBe(401)
    expect(JSON.parse(r.bytes.toString()).error.status).toBe('UNAUTHENTICATED')
    expect(vertex.requests.filter((q) => q.refused === 'expired token')).toHaveLength(2)
    expect(usages).toHaveLength(0)
  })
})
