/**
 * The contract, route by route: this file iterates the mounted route table, so every
 * route — including ones added later — is probed for authentication, ownership,
 * validation and robustness against malformed input.
 */
import type { AnyRoute } from '@berth/core'
import { ID_PREFIX, silentLogger } from '@berth/core'
import { localRuntime } from '@berth/adapter-local'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { collectionOf, fixtures, type Actor } from './fixtures.js'
import { ADMIN_TOKEN, startServer, type TestServer } from './helpers.js'

let s: TestServer
let alice: Actor
let bob: Actor
let fx: ReturnType<typeof fixtures>

const runtimeDir = mkdtempSync(join(tmpdir(), 'berth-contract-rt-'))
beforeAll(async () => {
  // A real (local) runtime, so task routes accept work; no runner is installed, so every
  // task ends failed with CONTAINER_FAILED, a definite state, quickly.
  s = await startServer({
    bodyLimit: 64 * 1024,
    runtime: localRuntime({ baseDir: runtimeDir, logger: silentLogger }),
    pool: { image: 'local', min: 0, max: 4 },
    runner: { command: ['berth-runner-not-installed'] },
    concurrency: 1000,
  })
  await s.berth.ready
  alice = await s.user('Alice')
  bob = await s.user('Bob')
  fx = fixtures(s)
})
afterAll(async () => {
  await s.close()
  rmSync(runtimeDir, { recursive: true, force: true })
})

const routes = () => s.berth.routes
const isVersioned = (r: AnyRoute) => r.path.startsWith('/v1/')
const hasId = (r: AnyRoute) => r.path.includes('/:id')

/**
 * Fill `:id` with a value; any other `:param` with an id of its own kind that exists
 * nowhere (a task's approval request), or with the same value when it has no id kind.
 */
const fill = (r: AnyRoute, id: string) =>
  r.path.replace(/:([a-zA-Z_]+)/g, (_, name: string) =>
    encodeURIComponent(name === 'id' ? id : (unknownIdOf(r, name) ?? id)),
  )

/** A well-formed id of the right kind that exists nowhere. */
function unknownId(r: AnyRoute): string {
  const id = unknownIdOf(r, 'id')
  if (!id) throw new Error(`cannot tell the id kind of ${r.name}`)
  return id
}

/** A well-formed id of the kind path parameter `name` takes, or undefined when it takes no id. */
function unknownIdOf(r: AnyRoute, name: string): string | undefined {
  const prefix = Object.values(ID_PREFIX).find((p) => {
    const parsed =
      r.params && (r.params as { entries: Record<string, { pipe?: { requirement?: RegExp }[] }> }).entries[name]
    return parsed?.pipe?.some(
      (a: { requirement?: RegExp }) =>
        a.requirement instanceof RegExp && a.requirement.test(`${p}_zzzzzzzzzzzzzzzzzzzz`),
    )
  })
  return prefix && `${prefix}_zzzzzzzzzzzzzzzzzzzz`
}

async function expectError(res: Response, status: number, code: string) {
  const text = await res.text()
  expect({ status: res.status, route: res.url }).toEqual({ status, route: res.url })
  const body = JSON.parse(text) as { error: unknown; code: unknown }
  expect(body.code).toBe(code)
  expect(typeof body.error).toBe('string')
  expect(res.headers.get('content-type')).toMatch(/^application\/json/)
  return body as {
    error: string
    code: string
    details?: { issues?: { location: string; path: string; message: string }[] }
  }
}

/** A request body a route accepts as well-formed: a valid create body, or `{}` for updates. */
async function validBody(r: AnyRoute, owner: Actor): Promise<Record<string, unknown> | undefined> {
  if (!r.body) return undefined
  if (r.method === 'POST' && !hasId(r)) {
    const make = fx.bodies[r.path as keyof typeof fx.bodies]
    if (make) return make(owner)
    if (r.path === '/admin/users') return { name: 'Someone' }
    throw new Error(`no valid body fixture for ${r.name}: add one to test/fixtures.ts`)
  }
  // Actions on a resource whose body has required fields (a decision, a message).
  return fx.actionBodies[r.name as keyof typeof fx.actionBodies]?.() ?? {}
}

/** Whether a body field takes any JSON object (a JSON Schema, a tool's replacement input): an object is no wrong type for it. */
function takesAnyObject(field: unknown): boolean {
  let s = field as { type: string; wrapped?: unknown; value?: { type: string } }
  while (s.wrapped) s = s.wrapped as typeof s
  return s.type === 'record' && s.value?.type === 'unknown'
}

describe('authentication', () => {
  it('every non-public route answers 401 without credentials and with a wrong key', async () => {
    const guarded = routes().filter((r) => r.auth !== 'public')
    expect(guarded.length).toBeGreaterThan(30)
    for (const r of guarded) {
      const path = hasId(r) ? fill(r, unknownId(r)) : r.path
      const init = { method: r.method, ...(r.body && { json: {} }) }
      await expectError(await s.request(path, init), 401, 'UNAUTHORIZED')
      await expectError(await s.request(path, { ...init, token: 'berth_sk_not-a-real-key' }), 401, 'UNAUTHORIZED')
      await expectError(
        await s.request(path, { ...init, headers: { authorization: 'Basic Zm9vOmJhcg==' } }),
        401,
        'UNAUTHORIZED',
      )
    }
  })

  it('every /v1 route is authenticated', () => {
    const open = routes().filter((r) => isVersioned(r) && r.auth === 'public')
    // Except the Git OAuth return URL (API.md puts it under /v1): the browser comes back from
    // the provider without credentials; the signed, single-use state names the caller.
    expect(open.map((r) => r.name)).toEqual(['git.callback'])
  })

  it('admin routes answer 403 to an ordinary caller and work for the operator token', async () => {
    const admin = routes().filter((r) => r.auth === 'admin')
    expect(admin.length).toBeGreaterThanOrEqual(5)
    for (const r of admin) {
      const path = hasId(r) ? fill(r, unknownId(r)) : r.path
      await expectError(
        await s.request(path, { method: r.method, token: alice.token, ...(r.body && { json: {} }) }),
        403,
        'FORBIDDEN',
      )
    }
    expect((await s.request('/admin/users', { token: ADMIN_TOKEN })).status).toBe(200)
  })

  it('a user with role admin is an operator too', async () => {
    const root = await s.user('Root', 'admin')
    const res = await s.request('/admin/users?limit=100', { token: root.token })
    expect(res.status).toBe(200)
    const { users } = (await res.json()) as { users: { id: string }[] }
    expect(users.map((u) => u.id)).toContain(alice.id)
  })
})

describe('ownership', () => {
  it("every caller route with an :id answers 404 for another caller's resource and leaves it unchanged", async () => {
    const owned = routes().filter((r) => r.auth === 'caller' && hasId(r))
    expect(owned.length).toBeGreaterThan(15)
    for (const r of owned) {
      const collection = collectionOf(r.path)
      const id = await fx.make(collection, alice)
      const before = await (await s.request(`${collection}/${id}`, { token: alice.token })).text()
      const body = await validBody(r, bob)
      const res = await s.request(fill(r, id), { method: r.method, token: bob.token, ...(body && { json: body }) })
      await expectError(res, 404, 'NOT_FOUND')
      const after = await s.request(`${collection}/${id}`, { token: alice.token })
      expect(after.status, `${r.name}: the owner still reads it`).toBe(200)
      expect(await after.text()).toBe(before)
    }
  })

  it('every route with an :id answers 404 for an unknown id', async () => {
    for (const r of routes().filter(hasId)) {
      const token = r.auth === 'admin' ? ADMIN_TOKEN : alice.token
      const body = r.body ? (r.auth === 'admin' ? {} : await validBody(r, alice)) : undefined
      await expectError(
        await s.request(fill(r, unknownId(r)), { method: r.method, token, ...(body && { json: body }) }),
        404,
        'NOT_FOUND',
      )
    }
  })

  it("lists never show another caller's resources", async () => {
    // Every caller list (a `limit` query, no `:id`). Pool containers exist only through
    // tasks; their visibility per caller is covered by pool.test.ts.
    const lists = routes().filter(
      (r) =>
        r.auth === 'caller' &&
        r.method === 'GET' &&
        !hasId(r) &&
        r.query &&
        'limit' in (r.query as unknown as { entries: object }).entries &&
        r.path !== '/v1/pool/containers',
    )
    expect(lists.length).toBeGreaterThanOrEqual(11)
    for (const r of lists) {
      const mine = await fx.make(r.path, alice)
      const res = await s.request(`${r.path}?limit=100`, { token: bob.token })
      expect(res.status).toBe(200)
      expect(await res.text()).not.toContain(mine)
      // ...while its owner does see it (an always-empty list would pass the line above).
      const own = await s.request(`${r.path}?limit=100`, { token: alice.token })
      expect(await own.text(), r.name).toContain(mine)
    }
  })

  it('a repeated DELETE answers 404', async () => {
    // A preview exists only for a warm session container (previews.test.ts revokes one twice).
    const deletes = routes().filter(
      (r) => r.auth === 'caller' && r.method === 'DELETE' && !r.path.includes('/previews/'),
    )
    expect(deletes.length).toBeGreaterThanOrEqual(7)
    for (const r of deletes) {
      const id = await fx.make(collectionOf(r.path), alice)
      expect((await s.request(fill(r, id), { method: 'DELETE', token: alice.token })).status).toBe(204)
      await expectError(await s.request(fill(r, id), { method: 'DELETE', token: alice.token }), 404, 'NOT_FOUND')
      await expectError(await s.request(`${collectionOf(r.path)}/${id}`, { token: alice.token }), 404, 'NOT_FOUND')
    }
  })
})

describe('validation', () => {
  /** Routes with a body, and a path to send it to (an existing resource of Alice's). */
  async function bodyTargets() {
    const out: { r: AnyRoute; path: string; valid: Record<string, unknown>; token: string }[] = []
    for (const r of routes().filter((x) => x.body)) {
      const token = r.auth === 'admin' ? ADMIN_TOKEN : alice.token
      let path = r.path
      if (hasId(r)) {
        const c = collectionOf(r.path)
        path = fill(r, c.startsWith('/admin/users') ? await adminUserId() : await fx.make(c, alice))
      }
      out.push({ r, path, valid: (await validBody(r, alice)) ?? {}, token })
    }
    return out
  }
  const adminUserId = async () => (await s.user('Target')).id

  it('every field of every body answers 400 VALIDATION_FAILED naming the field when it has the wrong type', async () => {
    let probed = 0
    for (const { r, path, valid, token } of await bodyTargets()) {
      const entries = (r.body as unknown as { entries: Record<string, unknown> }).entries
      for (const field of Object.keys(entries)) {
        for (const bad of takesAnyObject(entries[field]) ? ['text', 12345] : [{ $bad: true }, 12345]) {
          if (
            typeof bad === 'number' &&
            /importance|page|limit|timeout_s|duration_s|monthly_budget|port|ttl_s|max_running/.test(field)
          )
            continue
          const res = await s.request(path, { method: r.method, token, json: { ...valid, [field]: bad } })
          const err = await expectError(res, 400, 'VALIDATION_FAILED')
          const paths = err.details?.issues?.map((i) => i.path) ?? []
          expect(
            paths.some((p) => p === field || p.startsWith(`${field}.`)),
            `${r.name} ${field}: ${JSON.stringify(err)}`,
          ).toBe(true)
          expect(err.details?.issues?.every((i) => i.location === 'body')).toBe(true)
          probed++
        }
      }
    }
    expect(probed).toBeGreaterThan(100)
  })

  it('unknown fields, non-object bodies, malformed JSON and missing bodies are 400; bodies not sent as JSON 415', async () => {
    for (const { r, path, valid, token } of await bodyTargets()) {
      const unknown = await expectError(
        await s.request(path, { method: r.method, token, json: { ...valid, surprise: 1 } }),
        400,
        'VALIDATION_FAILED',
      )
      expect(unknown.details?.issues).toContainEqual({ location: 'body', path: 'surprise', message: 'unknown field' })
      for (const json of [[], 'text', 42, null, true]) {
        await expectError(await s.request(path, { method: r.method, token, json }), 400, 'VALIDATION_FAILED')
      }
      const headers = { 'content-type': 'application/json' }
      for (const body of ['{', '{"a":', 'nul', '\u0000', '{"a":1}}', '\ud800']) {
        await expectError(await s.request(path, { method: r.method, token, headers, body }), 400, 'VALIDATION_FAILED')
      }
      // A route whose body is optional reads an absent one as `{}` (the fork tests cover that).
      if (!r.bodyOptional)
        await expectError(await s.request(path, { method: r.method, token }), 400, 'VALIDATION_FAILED')
      // A body is never guessed to be JSON: another content type, or none, is 415.
      for (const type of ['text/plain', 'application/x-www-form-urlencoded', null]) {
        const res = await s.request(path, {
          method: r.method,
          token,
          ...(type && { headers: { 'content-type': type } }),
          // Bytes, so that fetch adds no content type of its own.
          body: new TextEncoder().encode(JSON.stringify(valid)),
        })
        const err = await expectError(res, 415, 'UNSUPPORTED_MEDIA_TYPE')
        expect(err.details, `${r.name} ${type}`).toEqual({ expected: 'application/json', received: type })
      }
    }
  })

  it('bodies over the limit are 413 whether declared or streamed', async () => {
    const huge = JSON.stringify({ name: 'x'.repeat(200 * 1024) })
    for (const { r, path, token } of await bodyTargets()) {
      await expectError(
        await s.request(path, { method: r.method, token, headers: { 'content-type': 'application/json' }, body: huge }),
        413,
        'PAYLOAD_TOO_LARGE',
      )
      const stream = new ReadableStream({
        start(c) {
          for (let i = 0; i < 20; i++) c.enqueue(new TextEncoder().encode(i === 0 ? '{"name":"' : 'y'.repeat(8 * 1024)))
          c.close()
        },
      })
      const res = await s.request(path, {
        method: r.method,
        token,
        headers: { 'content-type': 'application/json' },
        body: stream,
        duplex: 'half',
      } as RequestInit)
      await expectError(res, 413, 'PAYLOAD_TOO_LARGE')
    }
  })

  it('paging and filter queries are validated with the field named', async () => {
    const lists = routes().filter(
      (r) => r.method === 'GET' && r.query && 'limit' in (r.query as unknown as { entries: object }).entries,
    )
    expect(lists.length).toBeGreaterThanOrEqual(8)
    for (const r of lists) {
      const token = r.auth === 'admin' ? ADMIN_TOKEN : alice.token
      const path = hasId(r) ? fill(r, await fx.make(collectionOf(r.path), alice)) : r.path
      const entries = (r.query as unknown as { entries: object }).entries
      const cases = [
        ['limit=0', 'limit'],
        ['limit=101', 'limit'],
        ['limit=ten', 'limit'],
      ]
      if ('page' in entries)
        cases.push(['page=0', 'page'], ['page=-1', 'page'], ['page=1.5', 'page'], ['page=1e309', 'page'])
      if ('after' in entries) cases.push(['after=-1', 'after'], ['after=x', 'after'])
      for (const [q, field] of cases as [string, string][]) {
        const err = await expectError(await s.request(`${path}?${q}`, { token }), 400, 'VALIDATION_FAILED')
        expect(err.details?.issues?.[0]).toMatchObject({ location: 'query', path: field })
      }
      expect((await s.request(`${path}?page=2&limit=100&unrelated=1`, { token })).status).toBe(200)
    }
  })

  it('malformed path parameters are 400, never 500', async () => {
    for (const r of routes().filter(hasId)) {
      const token = r.auth === 'admin' ? ADMIN_TOKEN : alice.token
      for (const garbage of [
        '..',
        'prof_',
        '%00',
        "' OR 1=1 --",
        'a'.repeat(5000),
        'PROF_ABC',
        '../../etc/passwd',
        '💥',
      ]) {
        const res = await s.request(fill(r, garbage), { method: r.method, token, ...(r.body && { json: {} }) })
        // `..` segments are resolved by the URL parser, so they may land on another path (405),
        // or on another route (`GET /admin/users/../limits` is `GET /admin/limits`): not this one.
        if (garbage === '..' && res.ok && new URL(res.url).pathname !== fill(r, garbage)) continue
        expect([400, 404, 405], `${r.name} with ${garbage.slice(0, 20)}`).toContain(res.status)
        await expectError(
          res,
          res.status,
          { 400: 'VALIDATION_FAILED', 404: 'NOT_FOUND', 405: 'METHOD_NOT_ALLOWED' }[res.status as 400]!,
        )
      }
    }
  })
})

describe('robustness', () => {
  it('no route answers 500 to garbage: random bodies, queries, headers and paths', async () => {
    // A fixed-seed generator so a failure reproduces.
    let seed = 42
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
    // JSON.parse gives `__proto__` as an own key, the way a hostile body would arrive.
    const values: unknown[] = [
      null,
      true,
      0,
      -1,
      1e308,
      'x',
      '',
      '💥',
      [],
      [1, 'a'],
      {},
      { a: { b: [null] } },
      'x'.repeat(3000),
      '__proto__',
      JSON.parse('{"__proto__":{"admin":true}}'),
      JSON.parse('{"constructor":{"prototype":{}}}'),
    ]
    let count = 0
    for (const r of routes()) {
      const token = r.auth === 'admin' ? ADMIN_TOKEN : r.auth === 'caller' ? alice.token : undefined
      const fields = r.body ? Object.keys((r.body as unknown as { entries: object }).entries) : ['a']
      for (let i = 0; i < 25; i++) {
        const body: Record<string, unknown> = {}
        for (const f of fields) if (rand() < 0.6) body[f] = pick(values)
        if (rand() < 0.2) body[pick(['__proto__', 'constructor', 'x'])] = pick(values)
        const query = new URLSearchParams()
        for (const q of ['page', 'limit', 'profile_id', 'type', 'x'])
          if (rand() < 0.3) query.append(q, String(pick(values)))
        const path =
          (hasId(r) ? fill(r, pick(['prof_abc', 'x', unknownId(r), '%E2%82', '.'])) : r.path) +
          (query.size ? `?${query}` : '')
        const res = await s.request(path, {
          method: r.method,
          ...(token && { token }),
          headers: {
            'content-type': pick([
              'application/json',
              'application/json; charset=utf-8',
              'text/html',
              'application/x-www-form-urlencoded',
            ]),
          },
          body: r.method === 'GET' ? undefined : rand() < 0.1 ? '{"' : JSON.stringify(body),
        })
        expect(res.status, `${r.method} ${path} ${JSON.stringify(body).slice(0, 200)}`).toBeLessThan(500)
        if (res.status >= 400) await expectError(res, res.status, ((await res.clone().json()) as { code: string }).code)
        else await res.arrayBuffer()
        count++
      }
    }
    expect(count).toBeGreaterThan(1000)
    expect(s.logs.filter((l) => l.includes('"level":"error"'))).toEqual([])
  }, 60_000)

  it('unknown routes are 404 and wrong methods 405 with Allow, both in the error shape', async () => {
    await expectError(await s.request('/v1/nothing-here', { token: alice.token }), 404, 'NOT_FOUND')
    await expectError(await s.request('/v1/profiles/prof_abc/unknown', { token: alice.token }), 404, 'NOT_FOUND')
    const paths = new Map<string, Set<string>>()
    for (const r of routes()) paths.set(r.path, (paths.get(r.path) ?? new Set()).add(r.method))
    for (const [path, methods] of paths) {
      const wrong = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].find((m) => !methods.has(m))!
      const res = await s.request(path.replace(/:[a-zA-Z]+/g, 'x'), { method: wrong, token: alice.token })
      const err = await expectError(res, 405, 'METHOD_NOT_ALLOWED')
      expect(res.headers.get('allow')?.split(', ').sort()).toEqual([...methods].sort())
      expect(err.error).toContain(wrong)
    }
  })

  it('malformed URL encoding is a 400 in the error shape', async () => {
    await expectError(await s.request('/v1/profiles/%ZZ', { token: alice.token }), 400, 'VALIDATION_FAILED')
  })
})
