/**
 * An independent fuzzer driven by the served OpenAPI document: for every operation it
 * sends requests built from the document's own schemas (valid values, boundary values and
 * deliberately wrong ones), with a fixed seed and a bounded time, against a live server.
 * It fails on any 500, any other 5xx the operation does not document, and any status the
 * document does not list for that operation. The server has no container engine and no
 * provider configured, so the documented 502s of those operations are expected answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type TestServer, type Json } from './helpers.js'

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
      let res: Response
      try {
        res = await fetch(target, { method, headers, ...(body !== undefined && { body }), redirect: 'manual' })
      } catch (err) {
        // A URL fetch itself refuses to send (e.g. a malformed percent escape it rejects) is not the server's answer.
        if (
          err instanceof TypeError &&
          /URL|Invalid/i.test(String(err.message) + String((err as { cause?: Error }).cause?.message))
        )
          continue
        throw err
      }
      const text = await res.text()
      const key = `${method} ${path} → ${res.status}`
      seen.set(key, (seen.get(key) ?? 0) + 1)
      const documented = op.responses?.[String(res.status)] ?? op.responses?.default
      const code = (() => {
        try {
          return (JSON.parse(text) as Schema).code as string | undefined
        } catch {
          return undefined
        }
      })()
      if (res.status === 500) problems.push(`${method} ${target.slice(s.url.length, 300)} → 500 ${text.slice(0, 200)}`)
      else if (!documented)
        problems.push(`${method} ${target.slice(s.url.length, 300)} → undocumented ${res.status} ${text.slice(0, 200)}`)
      else if (res.status >= 500 && !['CONTAINER_FAILED', 'BAD_GATEWAY', 'MODEL_ERROR'].includes(code ?? '')) {
        problems.push(`${method} ${target.slice(s.url.length, 300)} → ${res.status} ${text.slice(0, 200)}`)
      } else if (res.status >= 400 && res.status !== 431 && !code)
        problems.push(`${method} ${path} → ${res.status} without the error shape: ${text.slice(0, 200)}`)
      if (problems.length >= 20) break
    }
    expect(problems, `after ${sent} requests`).toEqual([])
    // The run really exercised the API: many operations, refusals and successes alike.
    expect(sent).toBeGreaterThan(ops.length * 3)
    const statuses = new Set([...seen.keys()].map((k) => Number(k.split('→ ')[1])))
    expect([...statuses].filter((x) => x < 300).length).toBeGreaterThan(0)
    expect(statuses.has(400) && statuses.has(404) && statuses.has(401)).toBe(true)
    // No error-level log: nothing the fuzzer sent was a server failure.
    expect(s.logs.filter((l) => l.includes('"level":"error"')).slice(0, 3)).toEqual([])
  }, 90_000)
})

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
