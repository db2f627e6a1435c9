import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BerthClient, BerthError } from '@berth/client'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'

let s: TestServer
let a: { token: string; id: string }
let b: { token: string; id: string }
let apiA: BerthClient
let apiB: BerthClient

/** A POST of a body the typed client would not let a test write (missing fields, unknown enum values). */
async function rawPost(token: string, path: string, json: unknown): Promise<{ status: number; body: unknown }> {
  const res = await s.request(path, { method: 'POST', token, json })
  return { status: res.status, body: await res.json() }
}
/** The paths of the issues of a 400, from a BerthError or a raw error body. */
const issuePaths = (refused: BerthError | { body: unknown }) => {
  const details =
    'details' in refused ? refused.details : (refused.body as { details?: Record<string, unknown> }).details
  return ((details?.issues ?? []) as { path: string }[]).map((i) => i.path)
}
const names = (items: readonly unknown[]) => items.map((x) => (x as { name: string }).name)

beforeAll(async () => {
  s = await startServer()
  a = await s.user('A')
  b = await s.user('B')
  apiA = clientFor(s, a.token)
  apiB = clientFor(s, b.token)
})
afterAll(() => s.close())

describe('model credentials and profiles', () => {
  it('an anthropic credential needs a key; stub does not', async () => {
    const missing = await failure(apiA.apiKeys.create({ body: { name: 'x', provider: 'anthropic' } }))
    expect(missing.status).toBe(400)
    expect(issuePaths(missing)).toEqual(['key'])
    expect((await apiA.apiKeys.create({ body: { name: 'x', provider: 'stub' } })).has_key).toBe(false)
    const bad = await rawPost(a.token, '/v1/api-keys', { name: 'x', provider: 'openai', key: 'k' })
    expect(issuePaths(bad)).toEqual(['provider'])
    const url = await failure(
      apiA.apiKeys.create({ body: { name: 'x', provider: 'anthropic', key: 'k', base_url: 'file:///etc/passwd' } }),
    )
    expect(issuePaths(url)).toEqual(['base_url'])
  })

  it('profiles: required fields, own credential, allowed model, slug unique per owner', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'k', provider: 'stub', allowed_models: ['claude-haiku-*'] } })
    const empty = await rawPost(a.token, '/v1/profiles', {})
    expect(issuePaths(empty).sort()).toEqual(['api_key_id', 'name', 'slug'])

    const othersKey = await apiB.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const foreign = await failure(apiA.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: othersKey.id } }))
    expect(foreign.status).toBe(400)
    expect(issuePaths(foreign)).toEqual(['api_key_id'])

    const wrongModel = await failure(
      apiA.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id, model: 'claude-opus-4-5' } }),
    )
    expect(issuePaths(wrongModel)).toEqual(['model'])

    const p = await apiA.profiles.create({
      body: { name: 'P', slug: 'docs', api_key_id: key.id, model: 'claude-haiku-4-5', claude_md: '# Rules' },
    })
    expect(p).toMatchObject({
      slug: 'docs',
      model: 'claude-haiku-4-5',
      default_tools: [],
      memory_enabled: false,
      claude_md: '# Rules',
    })

    const dup = await failure(apiA.profiles.create({ body: { name: 'Q', slug: 'docs', api_key_id: key.id } }))
    expect(dup.status).toBe(400)
    expect(issuePaths(dup)).toEqual(['slug'])
    // Another owner may use the same slug.
    expect((await apiB.profiles.create({ body: { name: 'Q', slug: 'docs', api_key_id: othersKey.id } })).slug).toBe(
      'docs',
    )

    // Concurrent creates with one slug: exactly one wins.
    const race = await Promise.allSettled(
      Array.from({ length: 8 }, () => apiA.profiles.create({ body: { name: 'R', slug: 'race', api_key_id: key.id } })),
    )
    expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(1)

    const models = await apiA.profiles.models({ params: { id: p.id } })
    expect(models.models.map((m) => m.id)).toEqual(['claude-haiku-4-5'])
    expect(models.total).toBe(1)
  })

  it('lists omit claude_md, the full profile has it; updates validate and persist', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const p = await apiA.profiles.create({
      body: { name: 'L', slug: 'listed', api_key_id: key.id, claude_md: 'secret sauce' },
    })
    const list = await apiA.profiles.list({ query: { limit: 100 } })
    const item = list.profiles.find((x) => (x as { id: string }).id === p.id)
    expect(item).toBeDefined()
    expect('claude_md' in item!).toBe(false)
    expect(JSON.stringify(list)).not.toContain('secret sauce')

    const patched = await apiA.profiles.update({
      params: { id: p.id },
      body: { model: 'claude-sonnet-4-5', default_tools: ['Read', 'Bash(git:*)'], memory_enabled: true },
    })
    expect(patched).toMatchObject({
      model: 'claude-sonnet-4-5',
      default_tools: ['Read', 'Bash(git:*)'],
      memory_enabled: true,
      claude_md: 'secret sauce',
    })
    expect((await apiA.profiles.update({ params: { id: p.id }, body: { model: null } })).model).toBeNull()
    const badPatch = await failure(apiA.profiles.update({ params: { id: p.id }, body: { slug: 'Not A Slug' } }))
    expect(issuePaths(badPatch)).toEqual(['slug'])
    expect((await apiA.profiles.get({ params: { id: p.id } })).slug).toBe('listed')
  })

  it('MCP servers are validated by type', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const ok = await apiA.profiles.create({
      body: {
        name: 'M',
        slug: 'mcp',
        api_key_id: key.id,
        mcp_servers: {
          files: { type: 'stdio', command: 'npx', args: ['-y', 'server'] },
          web: { type: 'http', url: 'https://mcp.example.com/mcp' },
        },
      },
    })
    expect(Object.keys(ok.mcp_servers)).toEqual(['files', 'web'])
    const bad = await rawPost(a.token, '/v1/profiles', {
      name: 'M',
      slug: 'mcp2',
      api_key_id: key.id,
      mcp_servers: { web: { type: 'http' } },
    })
    expect(bad.status).toBe(400)
    expect(issuePaths(bad)[0]).toMatch(/^mcp_servers\.web/)
  })

  it('pages lists with a stable order and a total', async () => {
    const c = await s.user('Pager')
    const api = clientFor(s, c.token)
    const key = await api.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    for (let i = 0; i < 7; i++) {
      s.clock.advance(1000)
      await api.profiles.create({ body: { name: `P${i}`, slug: `p${i}`, api_key_id: key.id } })
    }
    const p1 = await api.profiles.list({ query: { limit: 3 } })
    const p3 = await api.profiles.list({ query: { limit: 3, page: 3 } })
    const p9 = await api.profiles.list({ query: { limit: 3, page: 9 } })
    const slugs = (list: typeof p1) => list.profiles.map((p) => (p as { slug: string }).slug)
    expect(p1.total).toBe(7)
    expect(slugs(p1)).toEqual(['p6', 'p5', 'p4'])
    expect(slugs(p3)).toEqual(['p0'])
    expect(p9).toEqual({ profiles: [], total: 7, next_cursor: null })
  })

  it('deleting a profile leaves the caller able to create one with its slug again', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const p = await apiA.profiles.create({ body: { name: 'D', slug: 'gone', api_key_id: key.id } })
    await apiA.profiles.delete({ params: { id: p.id } })
    expect((await apiA.profiles.create({ body: { name: 'D', slug: 'gone', api_key_id: key.id } })).slug).toBe('gone')
  })
})

describe('memory, secrets, tools, skills, agents', () => {
  let profileA: string
  let profileA2: string
  let profileB: string
  beforeAll(async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    profileA = (await apiA.profiles.create({ body: { name: 'A1', slug: 'scope-a1', api_key_id: key.id } })).id
    profileA2 = (await apiA.profiles.create({ body: { name: 'A2', slug: 'scope-a2', api_key_id: key.id } })).id
    const keyB = await apiB.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    profileB = (await apiB.profiles.create({ body: { name: 'B1', slug: 'scope-b1', api_key_id: keyB.id } })).id
  })

  it('memory lists span all profiles, filter by profile, and refuse another caller’s profile', async () => {
    const shared = await apiA.memory.create({ body: { type: 'fact', name: 'Shared', body: 'everyone' } })
    expect(shared).toMatchObject({ profile_id: null, importance: 3, description: null })
    await apiA.memory.create({ body: { type: 'fact', name: 'One', body: 'one', profile_id: profileA, importance: 5 } })
    await apiA.memory.create({ body: { type: 'preference', name: 'Two', body: 'two', profile_id: profileA2 } })
    const all = await apiA.memory.list({ query: { limit: 100 } })
    expect(names(all.memory).sort()).toEqual(['One', 'Shared', 'Two'])
    const one = await apiA.memory.list({ query: { profile_id: profileA } })
    expect(names(one.memory)).toEqual(['One'])
    expect((await apiA.memory.list({ query: { type: 'preference' } })).total).toBe(1)
    const foreign = await failure(
      apiA.memory.create({ body: { type: 'fact', name: 'X', body: 'x', profile_id: profileB } }),
    )
    expect(foreign.status).toBe(400)
    expect(issuePaths(foreign)).toEqual(['profile_id'])
    const imp = await failure(apiA.memory.create({ body: { type: 'fact', name: 'X', body: 'x', importance: 9 } }))
    expect(issuePaths(imp)).toEqual(['importance'])
    // The rows a task of profile A1 sees: its own and the shared ones, most important first.
    expect((await s.berth.services.memory.forProfile(a.id, profileA)).map((m) => m.name)).toEqual(['One', 'Shared'])
  })

  it('secrets: name pattern, unique names, scope, cross-user profile_ids → 400 naming the field', async () => {
    for (const name of ['lower', '1ABC', 'A-B', '', 'A B']) {
      const err = await failure(apiA.secrets.create({ body: { name, value: 'v' } }))
      expect(err.status).toBe(400)
      expect(issuePaths(err)).toEqual(['name'])
    }
    const created = await apiA.secrets.create({ body: { name: 'API_TOKEN', value: 'v1', profile_ids: [profileA] } })
    expect(created).toMatchObject({ name: 'API_TOKEN', scope: 'selected', profile_ids: [profileA] })
    expect((await failure(apiA.secrets.create({ body: { name: 'API_TOKEN', value: 'v2' } }))).status).toBe(400)
    const foreign = await failure(
      apiA.secrets.create({ body: { name: 'OTHER', value: 'v', profile_ids: [profileA, profileB] } }),
    )
    expect(foreign.status).toBe(400)
    expect(foreign.details?.issues).toEqual([
      { location: 'body', path: 'profile_ids.1', message: `profile ${profileB} does not exist` },
    ])
    expect(names((await apiA.secrets.list({ query: { limit: 100 } })).secrets)).not.toContain('OTHER')

    expect(await s.berth.services.secrets.forTask(a.id, profileA)).toEqual([
      { name: 'API_TOKEN', delivery: 'env', value: 'v1' },
    ])
    expect(await s.berth.services.secrets.forTask(a.id, profileA2)).toEqual([])
    const widened = await apiA.secrets.update({ params: { id: created.id }, body: { scope: 'all' } })
    expect(widened).toMatchObject({ scope: 'all', profile_ids: [] })
    expect(await s.berth.services.secrets.forTask(a.id, profileA2)).toEqual([
      { name: 'API_TOKEN', delivery: 'env', value: 'v1' },
    ])
    const badPatch = await failure(
      apiA.secrets.update({ params: { id: created.id }, body: { profile_ids: [profileB] } }),
    )
    expect(issuePaths(badPatch)).toEqual(['profile_ids.0'])
    expect((await apiA.secrets.get({ params: { id: created.id } })).scope).toBe('all')
  })

  it('tools, skills and agents share one surface with unique names and scopes', async () => {
    // One surface: the same calls on each, so each is called through `request` by its area's name.
    const cases = [
      ['tools', { server: { type: 'stdio', command: 'node' } }],
      ['skills', { body: '# Review\nCheck the diff.' }],
      ['agents', { prompt: 'You review.', tools: ['Read'] }],
    ] as const
    for (const [area, extra] of cases) {
      const create = (body: object) =>
        apiA.request(`${area}.create`, { body: body as never }) as Promise<{ id: string }>
      const made = await create({ name: 'reviewer', ...extra, profile_ids: [profileA] })
      expect(made).toMatchObject({ name: 'reviewer', scope: 'selected', profile_ids: [profileA], description: '' })
      expect(issuePaths(await failure(create({ name: 'reviewer', ...extra })))).toEqual(['name'])
      expect(issuePaths(await failure(create({ name: 'Bad Name', ...extra })))).toEqual(['name'])
      expect(issuePaths(await failure(create({ name: 'x', ...extra, profile_ids: [profileB] })))).toEqual([
        'profile_ids.0',
      ])
      const renamed = await apiA.request(`${area}.update`, {
        params: { id: made.id },
        body: { name: 'critic', description: 'Finds faults' },
      })
      expect(renamed).toMatchObject({ name: 'critic', description: 'Finds faults', scope: 'selected' })
      expect(await apiA.request(`${area}.list`)).toMatchObject({ [area]: [{ name: 'critic' }] })
      // The name is free again after the rename.
      expect(await create({ name: 'reviewer', ...extra })).toMatchObject({ name: 'reviewer' })
    }
    expect((await s.berth.services.skills.forProfile(a.id, profileA2)).map((x) => x.name)).toEqual(['reviewer'])
    expect((await s.berth.services.skills.forProfile(a.id, profileA)).map((x) => x.name).sort()).toEqual([
      'critic',
      'reviewer',
    ])
  })
})

describe("agents are held to their profiles' credentials, as profiles are", () => {
  it('a model the credential of a profile in scope does not allow is 400 naming model, on create and update', async () => {
    const api = clientFor(s, (await s.user('Agents')).token)
    const narrow = await api.apiKeys.create({
      body: { name: 'haiku only', provider: 'stub', allowed_models: ['claude-haiku-*'] },
    })
    const wide = await api.apiKeys.create({ body: { name: 'any', provider: 'stub' } })
    const p = await api.profiles.create({ body: { name: 'Narrow', slug: 'narrow', api_key_id: narrow.id } })
    const q = await api.profiles.create({ body: { name: 'Wide', slug: 'wide', api_key_id: wide.id } })
    // The profile refuses the model; an agent on that profile must too.
    const profile = await failure(api.profiles.update({ params: { id: p.id }, body: { model: 'claude-opus-4-5' } }))
    expect([profile.status, issuePaths(profile)]).toEqual([400, ['model']])
    for (const body of [
      { name: 'selected', prompt: 'x', model: 'claude-opus-4-5', profile_ids: [p.id] },
      { name: 'everywhere', prompt: 'x', model: 'claude-opus-4-5' },
      { name: 'alias', prompt: 'x', model: 'opus', profile_ids: [p.id, q.id] },
    ]) {
      const err = await failure(api.agents.create({ body }))
      expect([err.status, err.code, issuePaths(err)], body.name).toEqual([400, 'VALIDATION_FAILED', ['model']])
      expect(err.message).toContain(p.id)
    }
    expect((await api.agents.list()).total).toBe(0)
    // Allowed everywhere it applies: the credential's model, its family's alias, the main agent's.
    for (const model of ['claude-haiku-4-5', 'haiku', 'inherit', null])
      expect((await api.agents.create({ body: { name: `ok-${model}`, prompt: 'x', model } })).model).toBe(model)
    const onWide = await api.agents.create({
      body: { name: 'critic', prompt: 'x', model: 'claude-opus-4-5', profile_ids: [q.id] },
    })
    // An update that brings the model to a profile whose credential refuses it is refused, and changes nothing.
    for (const body of [{ profile_ids: [q.id, p.id] }, { scope: 'all' as const }]) {
      const err = await failure(api.agents.update({ params: { id: onWide.id }, body }))
      expect([err.status, issuePaths(err)]).toEqual([400, ['model']])
    }
    const ok = (await api.agents.list()).agents.find((a) => a.name === 'ok-haiku')!
    const err = await failure(api.agents.update({ params: { id: ok.id }, body: { model: 'claude-sonnet-4-5' } }))
    expect([err.status, issuePaths(err)]).toEqual([400, ['model']])
    expect(await api.agents.get({ params: { id: onWide.id } })).toMatchObject({
      scope: 'selected',
      profile_ids: [q.id],
    })
    expect((await api.agents.get({ params: { id: ok.id } })).model).toBe('haiku')
    // Other changes to an agent whose model and scope stay are not checked again.
    expect((await api.agents.update({ params: { id: onWide.id }, body: { prompt: 'y' } })).prompt).toBe('y')
  })
})

describe('admin', () => {
  it('issues keys shown once, revokes them at once, deletes users with their keys', async () => {
    const admin = clientFor(s, ADMIN_TOKEN)
    const made = await admin.admin.users.create({ body: { name: 'Temp' } })
    expect(made.key.token).toMatch(/^berth_sk_[a-z0-9]{40}$/)
    const extra = await admin.admin.keys.create({ params: { id: made.user.id }, body: { name: 'ci' } })
    const status = (token: string) =>
      clientFor(s, token)
        .profiles.list()
        .then(
          () => 200,
          (err: BerthError) => err.status,
        )
    expect(await status(extra.token)).toBe(200)
    await admin.admin.keys.delete({ params: { id: extra.id } })
    expect(await status(extra.token)).toBe(401)
    expect(await status(made.key.token)).toBe(200)
    await admin.admin.users.delete({ params: { id: made.user.id } })
    expect(await status(made.key.token)).toBe(401)
    expect((await failure(admin.admin.users.delete({ params: { id: made.user.id } }))).status).toBe(404)
  })

  it('without an operator token configured, the admin API is closed', async () => {
    const closed = await startServer({ adminToken: undefined })
    try {
      const res = await closed.request('/admin/users', { token: 'anything' })
      expect(res.status).toBe(401)
    } finally {
      await closed.close()
    }
  })

  it('an embedding app can replace authentication', async () => {
    const embedded = await startServer({
      authenticate: (req) => (req.headers.get('x-app-user') === 'u1' ? { id: 'usr_app1', role: 'user' } : null),
    })
    try {
      expect((await embedded.request('/v1/profiles', { headers: { 'x-app-user': 'u1' } })).status).toBe(200)
      expect((await embedded.request('/v1/profiles', { headers: { 'x-app-user': 'u2' } })).status).toBe(401)
      // An id that could escape its storage key range is refused, not used.
      const sneaky = await startServer({ authenticate: () => ({ id: 'usr_a:usr_b', role: 'user' }) })
      try {
        expect((await sneaky.request('/v1/profiles')).status).toBe(401)
        expect(sneaky.logs.some((l) => l.includes('invalid caller'))).toBe(true)
      } finally {
        await sneaky.close()
      }
    } finally {
      await embedded.close()
    }
  })
})
