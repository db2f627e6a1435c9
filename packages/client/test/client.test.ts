/** The typed client against a real Berth over real HTTP. */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest'
import { BerthError, createBerthClient, isBerthError, type BerthClient, type RouteOutput } from '@berth/client'
import { ADMIN_TOKEN, startServer, type TestServer } from '../../server/test/helpers.js'

/** A local port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as AddressInfo
  await new Promise((r) => server.close(r))
  return port
}

let s: TestServer
let alice: BerthClient
let bob: BerthClient

/** The rejection of a call, asserted to be a BerthError. */
async function failure(promise: Promise<unknown>): Promise<BerthError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(BerthError)
  return err as BerthError
}

beforeAll(async () => {
  s = await startServer()
  alice = createBerthClient({ baseURL: s.url, token: (await s.user('Alice')).token })
  bob = createBerthClient({ baseURL: s.url, token: (await s.user('Bob')).token })
})
afterAll(() => s.close())

describe('@berth/client against a real server', () => {
  it('calls a route without input with no argument', async () => {
    const anonymous = createBerthClient({ baseURL: s.url })
    const health = await anonymous.health()
    expect(health.ok).toBe(true)
    expect(typeof health.version).toBe('string')
    expectTypeOf(health.pool.idle).toEqualTypeOf<number>()
  })

  it('creates, reads, lists, updates and deletes profiles with typed results', async () => {
    const key = await alice.apiKeys.create({ body: { name: 'Offline', provider: 'stub' } })
    expect(key).toMatchObject({ provider: 'stub', has_key: false })
    expect(key.id).toMatch(/^key_/)

    const created = await alice.profiles.create({
      body: { name: 'Docs writer', slug: 'docs', api_key_id: key.id, claude_md: '# Be brief' },
    })
    expectTypeOf(created).toEqualTypeOf<RouteOutput<'profiles.get'>>()
    expect(created).toMatchObject({ name: 'Docs writer', slug: 'docs', claude_md: '# Be brief' })

    const read = await alice.profiles.get({ params: { id: created.id } })
    expect(read).toEqual(created)

    await alice.profiles.create({ body: { name: 'Second', slug: 'second', api_key_id: key.id } })
    const page1 = await alice.profiles.list({ query: { page: 1, limit: 1 } })
    expect(page1.total).toBe(2)
    expect(page1.profiles).toHaveLength(1)
    expect(page1.profiles[0]).not.toHaveProperty('claude_md')
    const all = await alice.profiles.list()
    expect(all.profiles.map((p) => p.slug).sort()).toEqual(['docs', 'second'])

    const updated = await alice.profiles.update({ params: { id: created.id }, body: { description: 'Writes docs' } })
    expect(updated.description).toBe('Writes docs')

    const models = await alice.profiles.models({ params: { id: created.id } })
    expect(models.total).toBe(models.models.length)

    const deleted = await alice.profiles.delete({ params: { id: created.id } })
    expect(deleted).toBeUndefined()
    expectTypeOf(deleted).toEqualTypeOf<void>()
    const gone = await failure(alice.profiles.get({ params: { id: created.id } }))
    expect(gone).toMatchObject({ status: 404, code: 'NOT_FOUND' })
  })

  it('reaches every name through the nested, camelCase and generic forms', async () => {
    const byDash = await alice['api-keys'].list()
    const byCamel = await alice.apiKeys.list()
    const byName = await alice.request('api-keys.list', { query: { limit: 100 } })
    expect(byDash).toEqual(byCamel)
    expect(byName.total).toBe(byDash.total)
    expect(alice.apiKeys).toBe(alice['api-keys'])
  })

  it("answers another caller's resource with BerthError 404 NOT_FOUND", async () => {
    const key = await alice.apiKeys.create({ body: { name: 'Mine', provider: 'stub' } })
    const profile = await alice.profiles.create({ body: { name: 'Private', slug: 'private', api_key_id: key.id } })
    const err = await failure(bob.profiles.get({ params: { id: profile.id } }))
    expect(err).toMatchObject({ status: 404, code: 'NOT_FOUND', route: 'profiles.get', method: 'GET' })
    expect(err.message).toMatch(/not found/i)
    expect(err.body).toMatchObject({ code: 'NOT_FOUND' })
    expect(isBerthError(err)).toBe(true)
    // Bob cannot delete it either, and Alice still has it.
    expect(await failure(bob.profiles.delete({ params: { id: profile.id } }))).toMatchObject({ status: 404 })
    expect((await alice.profiles.get({ params: { id: profile.id } })).id).toBe(profile.id)
  })

  it('surfaces a 400 with details.issues', async () => {
    const key = await alice.apiKeys.create({ body: { name: 'For 400', provider: 'stub' } })
    const err = await failure(alice.profiles.create({ body: { name: 'Bad', slug: 'Not A Slug', api_key_id: key.id } }))
    expect(err).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })
    const issues = (err.details as { issues: { location: string; path: string }[] }).issues
    expect(issues).toEqual(expect.arrayContaining([expect.objectContaining({ location: 'body', path: 'slug' })]))
  })

  it('surfaces 401 without a key and 403 for a non-admin on /admin', async () => {
    const anonymous = createBerthClient({ baseURL: s.url })
    expect(await failure(anonymous.profiles.list())).toMatchObject({ status: 401, code: 'UNAUTHORIZED' })
    expect(await failure(alice.admin.users.list())).toMatchObject({ status: 403, code: 'FORBIDDEN' })
  })

  it('calls the admin API with the operator token', async () => {
    const admin = createBerthClient({ baseURL: s.url, token: ADMIN_TOKEN })
    const { user, key } = await admin.admin.users.create({ body: { name: 'Carol' } })
    expect(user.id).toMatch(/^usr_/)
    const carol = createBerthClient({ baseURL: s.url, token: () => key.token })
    expect((await carol.profiles.list()).total).toBe(0)
    expect(await admin.admin.users.delete({ params: { id: user.id } })).toBeUndefined()
    expect(await failure(carol.profiles.list())).toMatchObject({ status: 401 })
  })

  it('URL-encodes path parameters so an id cannot change the route', async () => {
    const seen: string[] = []
    const spy = createBerthClient({
      baseURL: s.url,
      token: 'x',
      retry: false,
      fetch: (input, init) => {
        seen.push(String(input))
        return fetch(input, init)
      },
    })
    const err = await failure(spy.profiles.get({ params: { id: '../api-keys/x?y=1#z' } }))
    expect(seen[0]).toBe(`${s.url}/v1/profiles/..%2Fapi-keys%2Fx%3Fy%3D1%23z`)
    expect([400, 401, 404]).toContain(err.status)
    await expect(spy.profiles.get({ params: { id: '' } })).rejects.toThrow(/Missing path parameter "id"/)
  })

  it('keeps a path prefix in baseURL', async () => {
    const seen: string[] = []
    const prefixed = createBerthClient({
      baseURL: 'http://berth.invalid/some/prefix',
      retry: false,
      fetch: async (input) => {
        seen.push(String(input))
        return Response.json({ ok: true, version: 'x', pool: { min: 0, max: 0, in_use: 0, idle: 0 } })
      },
    })
    await prefixed.health()
    expect(seen).toEqual(['http://berth.invalid/some/prefix/health'])
  })

  it('reports an unreachable server as NETWORK_ERROR with status 0', async () => {
    const nowhere = createBerthClient({ baseURL: `http://127.0.0.1:${await closedPort()}`, retry: false })
    const err = await failure(nowhere.health())
    expect(err).toMatchObject({ status: 0, code: 'NETWORK_ERROR' })
    expect(err.message).toMatch(/ECONNREFUSED|fetch failed/)
  })
})
