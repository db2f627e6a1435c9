/**
 * An independent fuzzer driven by the served OpenAPI document: for every operation it
 * sends requests built from the document's own schemas (valid values, boundary values and
 * deliberately wrong ones), with a fixed seed and a bounded time, against a live server.
 * Some requests are mutated the way a careless or hostile client would send them, as
 * written on the wire: the path (`//`, dot segments plain and encoded, `\`, another case,
 * a `;param`), the content type of a body (none, text/plain, a form) and a body sent to an
 * operation that takes none. It fails on any 500, any other 5xx the operation does not
 * document, any status the document does not list for that operation, a mutated path that
 * is not refused (400 before routing, 404 for another case) and a mutated body that is
 * taken. The server has no container engine and no provider configured, so the documented
 * 502s of those operations are expected answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type TestServer, type Json } from './helpers.js'
import { rawRequest } from './raw-http.helpers.js'

/** The OpenAPI document and its parts, walked as plain JSON. */
type Schema = Json
type Operation = { method: string; path: string; op: Schema }

const SEED = 0x5eed_2026
const MAX_REQUESTS = 2500
const MAX_MS = 40_000

/** mulberry32: a small seeded PRNG, so every run sends the same requests. */
function prng(seed: number) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1))
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!
  return { next, int, pick, chance: (p: number) => next() < p }
}
type Rng = ReturnType<typeof prng>

const NASTY_STRINGS = [
  '',
  ' ',
  'a',
  '0',
  '-1',
  'null',
  'true',
  '../../etc/passwd',
  '%00',
  '\u0000',
  '\ud800',
  '😀'.repeat(3),
  'x'.repeat(5000),
  '<script>',
  "' OR 1=1 --",
  '{"a":1}',
  '\t\n',
  'ü',
  '/',
  '//evil.test',
  'https://evil.test',
]
const ID_PREFIXES = [
  'prof_',
  'task_',
  'ws_',
  'key_',
  'tool_',
  'skill_',
  'agent_',
  'sec_',
  'mem_',
  'int_',
  'pb_',
  'run_',
  'usr_',
  'sess_',
  'ctr_',
  'ga_',
]

/** Values from a JSON schema: mostly what it allows, sometimes its edges, sometimes not. */
function generator(doc: Schema, rng: Rng) {
  const resolve = (s: Schema): Schema => {
    let out = s
    for (let i = 0; i < 10 && out?.$ref; i++) out = doc.components.schemas[String(out.$ref).split('/').pop()!]
    return out ?? {}
  }
  const wrong = (): unknown => rng.pick([null, 42, -1, 1e308, true, 'text', [], {}, [1, 'a'], { x: { y: [] } }])

  const str = (s: Schema): string => {
    if (s.enum) return rng.pick(s.enum)
    if (s.const !== undefined) return String(s.const)
    if (s.format === 'date-time') return rng.pick([new Date(1767225600000).toISOString(), 'yesterday'])
    if (s.format === 'uri' || s.format === 'uri-reference')
      return rng.pick(['https://example.test/x', 'http://127.0.0.1:1/', 'not a url', 'file:///etc/passwd'])
    if (s.pattern && rng.chance(0.6)) return patterned(s.pattern)
    const max = Math.min(s.maxLength ?? 40, 300)
    const min = s.minLength ?? 0
    if (rng.chance(0.15)) return rng.pick(NASTY_STRINGS)
    if (rng.chance(0.1)) return 'y'.repeat(max + 1)
    const len = rng.int(min, Math.max(min, Math.min(max, 24)))
    let text = ''
    for (let i = 0; i < len; i++) text += rng.pick('abcdefghijklmnopqrstuvwxyz0123456789-_'.split(''))
    return text
  }
  /** A string aimed at a pattern: ids get their prefix, slugs and names their alphabet. */
  const patterned = (pattern: string): string => {
    const prefix = /^\^\(?([a-z]+[_-])/.exec(pattern)?.[1]
    if (prefix) return `${prefix}${Math.floor(rng.next() * 1e12).toString(36)}`
    return rng.pick(['abc', 'a-b_c', 'Abc', 'x'.repeat(64), '/settings', 'claude-sonnet-4-5', 'A_B'])
  }
  const num = (s: Schema): number => {
    const lo = s.minimum ?? s.exclusiveMinimum ?? -5
    const hi = s.maximum ?? s.exclusiveMaximum ?? lo + 100
    const edge = rng.pick([lo, hi, lo - 1, hi + 1, 0, -1, 0.5])
    const v = rng.chance(0.3) ? edge : lo + rng.next() * Math.min(hi - lo, 1000)
    return s.type === 'integer' && rng.chance(0.9) ? Math.round(v) : v
  }

  const value = (schema: Schema, depth = 0): unknown => {
    const s = resolve(schema)
    if (depth > 5) return null
    if (rng.chance(0.04)) return wrong()
    const options = s.anyOf ?? s.oneOf
    if (options) return value(rng.pick(options), depth + 1)
    if (s.allOf) return value(s.allOf[0], depth + 1)
    const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : s.properties ? ['object'] : ['string']
    const type = rng.pick(types)
    switch (type) {
      case 'null':
        return null
      case 'boolean':
        return rng.chance(0.5)
      case 'integer':
      case 'number':
        return num({ ...s, type })
      case 'array': {
        const n = rng.chance(0.1) ? (s.maxItems ?? 3) + 1 : rng.int(s.minItems ?? 0, Math.min(s.maxItems ?? 3, 3))
        return Array.from({ length: n }, () => value(s.items ?? {}, depth + 1))
      }
      case 'object': {
        const out: Record<string, unknown> = {}
        const required: string[] = s.required ?? []
        for (const [k, sub] of Object.entries<Schema>(s.properties ?? {})) {
          if (required.includes(k) ? rng.chance(0.95) : rng.chance(0.5)) out[k] = value(sub, depth + 1)
        }
        if (s.additionalProperties && typeof s.additionalProperties === 'object') {
          for (let i = rng.int(0, 2); i > 0; i--) out[str({ maxLength: 12 })] = value(s.additionalProperties, depth + 1)
        }
        if (rng.chance(0.05)) out[`unknown_${rng.int(0, 9)}`] = 1
        return out
      }
      default:
        return str(s)
    }
  }
  return { value, resolve, str }
}

/** A path parameter: an id of the right shape, or something else entirely. */
function pathValue(rng: Rng, gen: ReturnType<typeof generator>, schema: Schema): string {
  const roll = rng.next()
  if (roll < 0.5) return gen.str(gen.resolve(schema))
  if (roll < 0.7) return `${rng.pick(ID_PREFIXES)}${Math.floor(rng.next() * 1e12).toString(36)}`
  if (roll < 0.8) return rng.pick(['%', '%zz', '%2F', '..', '%2e%2e', '%00', '%E2%82', 'a%20b'])
  const nasty = rng.pick(NASTY_STRINGS) || 'x'
  // A lone surrogate has no UTF-8 form: send the bytes a careless client would.
  try {
    return encodeURIComponent(nasty)
  } catch {
    return '%ED%A0%80'
  }
}

/**
 * How a request is sent other than its operation says, and what the server must answer:
 * `refused` (400 before routing), `unknown` (404: no operation has that path), `declared`
 * (any status the operation lists), `not-taken` (any listed status but a success).
 */
const MUTATIONS = {
  'double-slash': 'refused',
  'dot-segment': 'refused',
  'encoded-dot-segment': 'refused',
  backslash: 'refused',
  'upper-case': 'unknown',
  'semicolon-param': 'declared',
  'no-content-type': 'not-taken',
  'text-content-type': 'not-taken',
  'form-content-type': 'not-taken',
  'body-without-operation-body': 'not-taken',
} as const
type Mutation = keyof typeof MUTATIONS

/** The path with one mutation: at a `/` of it (every path has one), or of its last segment. */
function mutatePath(rng: Rng, path: string, m: Mutation): string {
  const slashes = [...path].flatMap((c, i) => (c === '/' ? [i] : []))
  const at = rng.pick(slashes)
  const insert = (text: string, i = at) => path.slice(0, i) + text + path.slice(i)
  switch (m) {
    case 'double-slash':
      return insert('/')
    case 'dot-segment':
      return insert(rng.pick(['/.', '/..', '/x/..']), rng.chance(0.5) ? at : path.length)
    case 'encoded-dot-segment':
      return insert(rng.pick(['/%2e', '/%2E%2E', '/.%2e', '/%2e.', '/x/%2e%2e']), rng.chance(0.5) ? at : path.length)
    case 'backslash':
      return slashes.length > 1 ? `${path.slice(0, slashes.at(-1))}\\${path.slice(slashes.at(-1)! + 1)}` : `${path}\\x`
    case 'upper-case':
      return path.toUpperCase()
    case 'semicolon-param':
      return `${path};${rng.pick(['x=1', 'jsessionid=abc', ''])}`
    default:
      return path
  }
}

/**
 * A mutation for an operation (a quarter of the requests): its path, or its body when it
 * takes JSON or takes none. Of the kinds that fit the operation, the one sent least so far,
 * so every kind is sent many times whatever the document's mix of operations.
 */
function mutationFor(rng: Rng, op: Schema, sent: ReadonlyMap<Mutation, number>): Mutation | null {
  if (!rng.chance(0.25)) return null
  const content = op.requestBody?.content ?? {}
  const options: Mutation[] = ['double-slash', 'dot-segment', 'encoded-dot-segment', 'backslash', 'upper-case']
  options.push('semicolon-param')
  if (content['application/json']) options.push('no-content-type', 'text-content-type', 'form-content-type')
  if (!op.requestBody) options.push('body-without-operation-body')
  const count = (m: Mutation) => sent.get(m) ?? 0
  const least = Math.min(...options.map(count))
  return rng.pick(options.filter((m) => count(m) === least))
}

let s: TestServer
let token: string
let doc: Schema

beforeAll(async () => {
  s = await startServer({ validateResponses: false })
  token = (await s.user('Fuzz')).token
  doc = (await (await s.request('/openapi.json')).json()) as Schema
  // Something to find: a few records of the fuzzing caller.
  const key = (await (
    await s.request('/v1/api-keys', { method: 'POST', token, json: { name: 'k', provider: 'stub' } })
  ).json()) as Schema
  await s.request('/v1/profiles', { method: 'POST', token, json: { name: 'P', slug: 'p', api_key_id: key.id } })
})
afterAll(() => s.close())

describe('OpenAPI-driven fuzzing against the live server', () => {
  it(`answers every generated request with a documented status and never a 500 (seed ${SEED})`, async () => {
    const rng = prng(SEED)
    const gen = generator(doc, rng)
    const ops: Operation[] = Object.entries<Schema>(doc.paths).flatMap(([path, item]) =>
      Object.entries<Schema>(item)
        .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
        .map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
    )
    expect(ops.length).toBeGreaterThan(50)
    const problems: string[] = []
    const seen = new Map<string, number>()
    const mutated = new Map<Mutation, number>()
    const started = Date.now()
    let sent = 0
    for (; sent < MAX_REQUESTS && Date.now() - started < MAX_MS; sent++) {
      const { method, path, op } = ops[sent % ops.length]!
      const params: Schema[] = op.parameters ?? []
      let url = path
      for (const p of params.filter((x) => x.in === 'path'))
        url = url.replace(`{${p.name}}`, pathValue(rng, gen, p.schema ?? {}))
      const query = new URLSearchParams()
      for (const p of params.filter((x) => x.in === 'query')) {
        if (!(p.required || rng.chance(0.5))) continue
        const v = gen.value(p.schema ?? {})
        for (const one of Array.isArray(v) ? v : [v])
          query.append(p.name, typeof one === 'object' ? JSON.stringify(one) : String(one))
      }
      if (rng.chance(0.05)) query.append(gen.str({ maxLength: 8 }), gen.str({}))
      const headers = new Headers()
      const auth = rng.next()
      if (auth < 0.85) headers.set('authorization', `Bearer ${token}`)
      else if (auth < 0.9) headers.set('authorization', `Bearer ${ADMIN_TOKEN}`)
      else if (auth < 0.95) headers.set('authorization', 'Bearer berth_sk_fuzzwrong')
      let body: BodyInit | undefined
      const content = op.requestBody?.content ?? {}
      if (content['application/json']) {
        headers.set('content-type', rng.chance(0.97) ? 'application/json' : 'text/plain')
        body = rng.chance(0.05)
          ? rng.pick(['{', '[]', 'null', '"x"', '{"a":'])
          : JSON.stringify(gen.value(content['application/json'].schema ?? {}))
      } else if (content['multipart/form-data']) {
        const form = new FormData()
        if (rng.chance(0.8)) form.append('path', gen.str({ maxLength: 30 }))
        if (rng.chance(0.8)) form.append('files', new Blob(['fuzz']), gen.str({ maxLength: 20 }) || 'f.txt')
        body = form
      }
      const target = `${s.url}${url}${query.size ? `?${query}` : ''}`
      // An empty or dot segment makes another path (`/v1/agents/`, `/v1/pool`): not this operation.
      const template = new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`)
      if (!template.test(new URL(target).pathname)) continue
      const mutation = mutationFor(rng, op, mutated)
      let answer: { status: number; text: string } | null
      if (mutation) {
        mutated.set(mutation, (mutated.get(mutation) ?? 0) + 1)
        answer = await sendMutated(rng, mutation, { method, path: new URL(target).pathname, query, headers, body })
      } else answer = await sendAsIs(target, method, headers, body)
      // A URL fetch itself refuses to send (e.g. a malformed percent escape it rejects) is not the server's answer.
      if (!answer) continue
      const { status, text } = answer
      const shown = `${method} ${target.slice(s.url.length, 300)}${mutation ? ` (${mutation})` : ''}`
      const key = `${method} ${path} → ${status}`
      seen.set(key, (seen.get(key) ?? 0) + 1)
      const documented = op.responses?.[String(status)] ?? op.responses?.default
      const code = (() => {
        try {
          return (JSON.parse(text) as Schema).code as string | undefined
        } catch {
          return undefined
        }
      })()
      const expected = mutation ? MUTATIONS[mutation] : 'declared'
      if (status === 500) problems.push(`${shown} → 500 ${text.slice(0, 200)}`)
      else if (!documented) problems.push(`${shown} → undocumented ${status} ${text.slice(0, 200)}`)
      else if (status >= 500 && !['CONTAINER_FAILED', 'BAD_GATEWAY', 'MODEL_ERROR'].includes(code ?? '')) {
        problems.push(`${shown} → ${status} ${text.slice(0, 200)}`)
      } else if (status >= 400 && status !== 431 && !code)
        problems.push(`${shown} → ${status} without the error shape: ${text.slice(0, 200)}`)
      // Node answers 431 for a request line too long, before Berth sees the request.
      else if (status === 431) continue
      else if (expected === 'refused' && code !== 'VALIDATION_FAILED')
        problems.push(`${shown} → ${status}, not refused before routing: ${text.slice(0, 200)}`)
      // Upper case routes nowhere: 404, or 400 when its percent-encoding was malformed to begin with.
      else if (expected === 'unknown' && code !== 'NOT_FOUND' && code !== 'VALIDATION_FAILED')
        problems.push(`${shown} → ${status}, not 404`)
      else if (expected === 'not-taken' && status < 400) problems.push(`${shown} → ${status}: the body was taken`)
      if (problems.length >= 20) break
    }
    expect(problems, `after ${sent} requests`).toEqual([])
    // The run really exercised the API: many operations, refusals and successes alike.
    expect(sent).toBeGreaterThan(ops.length * 3)
    const statuses = new Set([...seen.keys()].map((k) => Number(k.split('→ ')[1])))
    expect([...statuses].filter((x) => x < 300).length).toBeGreaterThan(0)
    expect(statuses.has(400) && statuses.has(404) && statuses.has(401) && statuses.has(415)).toBe(true)
    // Every mutation was sent, many times.
    expect(Object.keys(MUTATIONS).filter((m) => (mutated.get(m as Mutation) ?? 0) < 20)).toEqual([])
    // No error-level log: nothing the fuzzer sent was a server failure.
    expect(s.logs.filter((l) => l.includes('"level":"error"')).slice(0, 3)).toEqual([])
  }, 90_000)
})

/** A generated request as fetch sends it; `null` when fetch refuses to send it. */
async function sendAsIs(
  target: string,
  method: string,
  headers: Headers,
  body: BodyInit | undefined,
): Promise<{ status: number; text: string } | null> {
  try {
    const res = await fetch(target, { method, headers, ...(body !== undefined && { body }), redirect: 'manual' })
    return { status: res.status, text: await res.text() }
  } catch (err) {
    if (
      err instanceof TypeError &&
      /URL|Invalid/i.test(String(err.message) + String((err as { cause?: Error }).cause?.message))
    )
      return null
    throw err
  }
}

/** A generated request with `mutation`, sent as written (no URL parser resolves its path); `null` when Node refuses to send it. */
async function sendMutated(
  rng: Rng,
  mutation: Mutation,
  r: { method: string; path: string; query: URLSearchParams; headers: Headers; body: BodyInit | undefined },
): Promise<{ status: number; text: string } | null> {
  const headers = Object.fromEntries(r.headers)
  let body = typeof r.body === 'string' ? r.body : undefined
  // A form's bytes have no fixed text: the path mutations of a multipart operation go without a body.
  if (r.body !== undefined && body === undefined) delete headers['content-type']
  if (mutation === 'no-content-type') delete headers['content-type']
  if (mutation === 'text-content-type') headers['content-type'] = rng.pick(['text/plain', 'text/plain;charset=UTF-8'])
  if (mutation === 'form-content-type') {
    headers['content-type'] = 'application/x-www-form-urlencoded'
    if (rng.chance(0.5)) body = 'a=1&b=2'
  }
  if (mutation === 'body-without-operation-body') {
    body = rng.pick(['{}', '{"x":1}', 'x'.repeat(rng.int(1, 70_000)), '[]'])
    if (rng.chance(0.5)) headers['content-type'] = 'application/json'
    if (rng.chance(0.3)) headers['transfer-encoding'] = 'chunked'
  }
  const path = mutatePath(rng, r.path, mutation) + (r.query.size ? `?${r.query}` : '')
  try {
    const res = await rawRequest(s.url, { method: r.method, path, headers, body })
    return { status: res.status, text: res.body }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_UNESCAPED_CHARACTERS') return null
    throw err
  }
}

describe('the document matches the server', () => {
  const op = (path: string, method = 'get') => doc.paths[path][method] as Schema
  it('OAuth callbacks require state; return paths carry their pattern', async () => {
    for (const path of [
      '/v1/integrations/git/{provider}/callback',
      '/api/chatprovider/callback',
      '/api/mailprovider/callback',
    ]) {
      const state = (op(path).parameters as Schema[]).find((p) => p.name === 'state')
      expect(state, path).toMatchObject({ in: 'query', required: true })
    }
    const text = JSON.stringify(doc)
    const pattern = /"returnPath"[^}]*"pattern":"([^"]+)"/.exec(text)?.[1]
    expect(pattern).toBeDefined()
    const re = new RegExp(JSON.parse(`"${pattern}"`))
    expect(['/settings/git?tab=1', '/'].every((p) => re.test(p))).toBe(true)
    expect(['//evil.test', 'https://evil.test', '/\\evil.test', '/a//b', '/\t/evil.test'].some((p) => re.test(p))).toBe(
      false,
    )
    // The server agrees with the document: a state is required.
    const missing = await s.request('/api/chatprovider/callback?code=abc')
    expect(missing.status).toBe(400)
  })

  it('/v1/ws is an upgrade: 101 documented, and a request without Upgrade is 426', async () => {
    const ws = op('/v1/ws')
    expect(Object.keys(ws.responses)).toEqual(expect.arrayContaining(['101', '426']))
    const plain = await s.request('/v1/ws', { token })
    expect(plain.status).toBe(426)
    expect(plain.headers.get('upgrade')).toBe('websocket')
  })

  it('documents 431 on every operation, and 413 wherever a body is read', async () => {
    for (const [path, item] of Object.entries<Schema>(doc.paths)) {
      for (const [method, o] of Object.entries<Schema>(item)) {
        expect(o.responses['431'], `${method} ${path}`).toBeDefined()
        if (o.requestBody) expect(o.responses['413'], `${method} ${path}`).toBeDefined()
      }
    }
    const huge = await fetch(`${s.url}/v1/profiles`, {
      headers: { authorization: `Bearer ${token}`, 'x-pad': 'p'.repeat(20_000) },
    })
    expect(huge.status).toBe(431)
  })
})
