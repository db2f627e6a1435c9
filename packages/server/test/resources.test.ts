import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer, type Json } from './helpers.js'

let s: TestServer
let a: { token: string; id: string }
let b: { token: string; id: string }

async function call(token: string, method: string, path: string, json?: unknown): Promise<{ status: number; body: Json }> {
  const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}
const issuePaths = (body: Json) => (body.details?.issues ?? []).map((i: Json) => i.path)

beforeAll(async () => {
  s = await startServer()
  a = await s.user('A')
  b = await s.user('B')
})
afterAll(() => s.close())

describe('model credentials and profiles', () => {
  it('an anthropic credential needs a key; stub does not', async () => {
    const missing = await call(a.token, 'POST', '/v1/api-keys', { name: 'x', provider: 'anthropic' })
    expect(missing.status).toBe(400)
    expect(issuePaths(missing.body)).toEqual(['key'])
    expect((await call(a.token, 'POST', '/v1/api-keys', { name: 'x', provider: 'stub' })).body.has_key).toBe(false)
    const bad = await call(a.token, 'POST', '/v1/api-keys', { name: 'x', provider: 'openai', key: 'k' })
    expect(issuePaths(bad.body)).toEqual(['provider'])
    const url = await call(a.token, 'POST', '/v1/api-keys', { name: 'x', provider: 'anthropic', key: 'k', base_url: 'file:///etc/passwd' })
    expect(issuePaths(url.body)).toEqual(['base_url'])
  })

  it('profiles: required fields, own credential, allowed model, slug unique per owner', async () => {
    const key = (await call(a.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub', allowed_models: ['claude-haiku-*'] })).body
    const empty = await call(a.token, 'POST', '/v1/profiles', {})
    expect(issuePaths(empty.body).sort()).toEqual(['api_key_id', 'name', 'slug'])

    const othersKey = (await call(b.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    const foreign = await call(a.token, 'POST', '/v1/profiles', { name: 'P', slug: 'p', api_key_id: othersKey.id })
    expect(foreign.status).toBe(400)
    expect(issuePaths(foreign.body)).toEqual(['api_key_id'])

    const wrongModel = await call(a.token, 'POST', '/v1/profiles', { name: 'P', slug: 'p', api_key_id: key.id, model: 'claude-opus-4-5' })
    expect(issuePaths(wrongModel.body)).toEqual(['model'])

    const p = await call(a.token, 'POST', '/v1/profiles', { name: 'P', slug: 'docs', api_key_id: key.id, model: 'claude-haiku-4-5', claude_md: '# Rules' })
    expect(p.status).toBe(201)
    expect(p.body).toMatchObject({ slug: 'docs', model: 'claude-haiku-4-5', default_tools: [], memory_enabled: false, claude_md: '# Rules' })

    const dup = await call(a.token, 'POST', '/v1/profiles', { name: 'Q', slug: 'docs', api_key_id: key.id })
    expect(dup.status).toBe(400)
    expect(issuePaths(dup.body)).toEqual(['slug'])
    // Another owner may use the same slug.
    expect((await call(b.token, 'POST', '/v1/profiles', { name: 'Q', slug: 'docs', api_key_id: othersKey.id })).status).toBe(201)

    // Concurrent creates with one slug: exactly one wins.
    const race = await Promise.all(Array.from({ length: 8 }, () => call(a.token, 'POST', '/v1/profiles', { name: 'R', slug: 'race', api_key_id: key.id })))
    expect(race.filter((r) => r.status === 201)).toHaveLength(1)

    const models = await call(a.token, 'GET', `/v1/profiles/${p.body.id}/models`)
    expect(models.body.models.map((m: Json) => m.id)).toEqual(['claude-haiku-4-5'])
    expect(models.body.total).toBe(1)
  })

  it('lists omit claude_md, the full profile has it; updates validate and persist', async () => {
    const key = (await call(a.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    const p = (await call(a.token, 'POST', '/v1/profiles', { name: 'L', slug: 'listed', api_key_id: key.id, claude_md: 'secret sauce' })).body
    const list = await call(a.token, 'GET', '/v1/profiles?limit=100')
    const item = list.body.profiles.find((x: Json) => x.id === p.id)
    expect(item).toBeDefined()
    expect('claude_md' in item).toBe(false)
    expect(JSON.stringify(list.body)).not.toContain('secret sauce')

    const patched = await call(a.token, 'PATCH', `/v1/profiles/${p.id}`, { model: 'claude-sonnet-4-5', default_tools: ['Read', 'Bash(git:*)'], memory_enabled: true })
    expect(patched.body).toMatchObject({ model: 'claude-sonnet-4-5', default_tools: ['Read', 'Bash(git:*)'], memory_enabled: true, claude_md: 'secret sauce' })
    expect((await call(a.token, 'PATCH', `/v1/profiles/${p.id}`, { model: null })).body.model).toBeNull()
    const badPatch = await call(a.token, 'PATCH', `/v1/profiles/${p.id}`, { slug: 'Not A Slug' })
    expect(issuePaths(badPatch.body)).toEqual(['slug'])
    expect((await call(a.token, 'GET', `/v1/profiles/${p.id}`)).body.slug).toBe('listed')
  })

  it('MCP servers are validated by type', async () => {
    const key = (await call(a.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    const ok = await call(a.token, 'POST', '/v1/profiles', {
      name: 'M',
      slug: 'mcp',
      api_key_id: key.id,
      mcp_servers: { files: { type: 'stdio', command: 'npx', args: ['-y', 'server'] }, web: { type: 'http', url: 'https://mcp.example.com/mcp' } },
    })
    expect(ok.status).toBe(201)
    const bad = await call(a.token, 'POST', '/v1/profiles', { name: 'M', slug: 'mcp2', api_key_id: key.id, mcp_servers: { web: { type: 'http' } } })
    expect(bad.status).toBe(400)
    expect(issuePaths(bad.body)[0]).toMatch(/^mcp_servers\.web/)
  })

  it('pages lists with a stable order and a total', async () => {
    const c = await s.user('Pager')
    const key = (await call(c.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    for (let i = 0; i < 7; i++) {
      s.clock.advance(1000)
      await call(c.token, 'POST', '/v1/profiles', { name: `P${i}`, slug: `p${i}`, api_key_id: key.id })
    }
    const p1 = await call(c.token, 'GET', '/v1/profiles?limit=3')
    const p3 = await call(c.token, 'GET', '/v1/profiles?limit=3&page=3')
    const p9 = await call(c.token, 'GET', '/v1/profiles?limit=3&page=9')
    expect(p1.body.total).toBe(7)
    expect(p1.body.profiles.map((p: Json) => p.slug)).toEqual(['p6', 'p5', 'p4'])
    expect(p3.body.profiles.map((p: Json) => p.slug)).toEqual(['p0'])
    expect(p9.body).toEqual({ profiles: [], total: 7 })
  })

  it('deleting a profile leaves the caller able to create one with its slug again', async () => {
    const key = (await call(a.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    const p = (await call(a.token, 'POST', '/v1/profiles', { name: 'D', slug: 'gone', api_key_id: key.id })).body
    expect((await call(a.token, 'DELETE', `/v1/profiles/${p.id}`)).status).toBe(204)
    expect((await call(a.token, 'POST', '/v1/profiles', { name: 'D', slug: 'gone', api_key_id: key.id })).status).toBe(201)
  })
})

describe('memory, secrets, tools, skills, agents', () => {
  let profileA: string
  let profileA2: string
  let profileB: string
  beforeAll(async () => {
    const key = (await call(a.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    profileA = (await call(a.token, 'POST', '/v1/profiles', { name: 'A1', slug: 'scope-a1', api_key_id: key.id })).body.id
    profileA2 = (await call(a.token, 'POST', '/v1/profiles', { name: 'A2', slug: 'scope-a2', api_key_id: key.id })).body.id
    const keyB = (await call(b.token, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    profileB = (await call(b.token, 'POST', '/v1/profiles', { name: 'B1', slug: 'scope-b1', api_key_id: keyB.id })).body.id
  })

  it('memory lists span all profiles, filter by profile, and refuse another caller’s profile', async () => {
    const shared = await call(a.token, 'POST', '/v1/memory', { type: 'fact', name: 'Shared', body: 'everyone' })
    expect(shared.body).toMatchObject({ profile_id: null, importance: 3, description: null })
    await call(a.token, 'POST', '/v1/memory', { type: 'fact', name: 'One', body: 'one', profile_id: profileA, importance: 5 })
    await call(a.token, 'POST', '/v1/memory', { type: 'preference', name: 'Two', body: 'two', profile_id: profileA2 })
    const all = await call(a.token, 'GET', '/v1/memory?limit=100')
    expect(all.body.memory.map((m: Json) => m.name).sort()).toEqual(['One', 'Shared', 'Two'])
    const one = await call(a.token, 'GET', `/v1/memory?profile_id=${profileA}`)
    expect(one.body.memory.map((m: Json) => m.name)).toEqual(['One'])
    expect((await call(a.token, 'GET', '/v1/memory?type=preference')).body.total).toBe(1)
    const foreign = await call(a.token, 'POST', '/v1/memory', { type: 'fact', name: 'X', body: 'x', profile_id: profileB })
    expect(foreign.status).toBe(400)
    expect(issuePaths(foreign.body)).toEqual(['profile_id'])
    const imp = await call(a.token, 'POST', '/v1/memory', { type: 'fact', name: 'X', body: 'x', importance: 9 })
    expect(issuePaths(imp.body)).toEqual(['importance'])
    // The rows a task of profile A1 sees: its own and the shared ones, most important first.
    expect((await s.berth.services.memory.forProfile(a.id, profileA)).map((m) => m.name)).toEqual(['One', 'Shared'])
  })

  it('secrets: name pattern, unique names, scope, cross-user profile_ids → 400 naming the field', async () => {
    for (const name of ['lower', '1ABC', 'A-B', '', 'A B']) {
      const res = await call(a.token, 'POST', '/v1/secrets', { name, value: 'v' })
      expect(res.status).toBe(400)
      expect(issuePaths(res.body)).toEqual(['name'])
    }
    const created = await call(a.token, 'POST', '/v1/secrets', { name: 'API_TOKEN', value: 'v1', profile_ids: [profileA] })
    expect(created.body).toMatchObject({ name: 'API_TOKEN', scope: 'selected', profile_ids: [profileA] })
    expect((await call(a.token, 'POST', '/v1/secrets', { name: 'API_TOKEN', value: 'v2' })).status).toBe(400)
    const foreign = await call(a.token, 'POST', '/v1/secrets', { name: 'OTHER', value: 'v', profile_ids: [profileA, profileB] })
    expect(foreign.status).toBe(400)
    expect(foreign.body.details.issues).toEqual([{ location: 'body', path: 'profile_ids.1', message: `profile ${profileB} does not exist` }])
    expect((await call(a.token, 'GET', '/v1/secrets?limit=100')).body.secrets.map((x: Json) => x.name)).not.toContain('OTHER')

    expect(await s.berth.services.secrets.environment(a.id, profileA)).toEqual({ API_TOKEN: 'v1' })
    expect(await s.berth.services.secrets.environment(a.id, profileA2)).toEqual({})
    const widened = await call(a.token, 'PATCH', `/v1/secrets/${created.body.id}`, { scope: 'all' })
    expect(widened.body).toMatchObject({ scope: 'all', profile_ids: [] })
    expect(await s.berth.services.secrets.environment(a.id, profileA2)).toEqual({ API_TOKEN: 'v1' })
    const badPatch = await call(a.token, 'PATCH', `/v1/secrets/${created.body.id}`, { profile_ids: [profileB] })
    expect(issuePaths(badPatch.body)).toEqual(['profile_ids.0'])
    expect((await call(a.token, 'GET', `/v1/secrets/${created.body.id}`)).body.scope).toBe('all')
  })

  it('tools, skills and agents share one surface with unique names and scopes', async () => {
    const cases = [
      ['/v1/tools', { server: { type: 'stdio', command: 'node' } }, 'tools'],
      ['/v1/skills', { body: '# Review\nCheck the diff.' }, 'skills'],
      ['/v1/agents', { prompt: 'You review.', tools: ['Read'] }, 'agents'],
    ] as const
    for (const [path, extra, plural] of cases) {
      const made = await call(a.token, 'POST', path, { name: 'reviewer', ...extra, profile_ids: [profileA] })
      expect(made.status).toBe(201)
      expect(made.body).toMatchObject({ name: 'reviewer', scope: 'selected', profile_ids: [profileA], description: '' })
      const dup = await call(a.token, 'POST', path, { name: 'reviewer', ...extra })
      expect(issuePaths(dup.body)).toEqual(['name'])
      expect(issuePaths((await call(a.token, 'POST', path, { name: 'Bad Name', ...extra })).body)).toEqual(['name'])
      const foreign = await call(a.token, 'POST', path, { name: 'x', ...extra, profile_ids: [profileB] })
      expect(issuePaths(foreign.body)).toEqual(['profile_ids.0'])
      const renamed = await call(a.token, 'PATCH', `${path}/${made.body.id}`, { name: 'critic', description: 'Finds faults' })
      expect(renamed.body).toMatchObject({ name: 'critic', description: 'Finds faults', scope: 'selected' })
      const list = await call(a.token, 'GET', path)
      expect(list.body[plural].map((x: Json) => x.name)).toEqual(['critic'])
      // The name is free again after the rename.
      expect((await call(a.token, 'POST', path, { name: 'reviewer', ...extra })).status).toBe(201)
    }
    expect((await s.berth.services.skills.forProfile(a.id, profileA2)).map((x) => x.name)).toEqual(['reviewer'])
    expect((await s.berth.services.skills.forProfile(a.id, profileA)).map((x) => x.name).sort()).toEqual(['critic', 'reviewer'])
  })
})

describe('admin', () => {
  it('issues keys shown once, revokes them at once, deletes users with their keys', async () => {
    const { ADMIN_TOKEN } = await import('./helpers.js')
    const made = await call(ADMIN_TOKEN, 'POST', '/admin/users', { name: 'Temp' })
    expect(made.status).toBe(201)
    expect(made.body.key.token).toMatch(/^berth_sk_[a-z0-9]{40}$/)
    const extra = await call(ADMIN_TOKEN, 'POST', `/admin/users/${made.body.user.id}/keys`, { name: 'ci' })
    expect((await call(extra.body.token, 'GET', '/v1/profiles')).status).toBe(200)
    expect((await call(ADMIN_TOKEN, 'DELETE', `/admin/keys/${extra.body.id}`)).status).toBe(204)
    expect((await call(extra.body.token, 'GET', '/v1/profiles')).status).toBe(401)
    expect((await call(made.body.key.token, 'GET', '/v1/profiles')).status).toBe(200)
    expect((await call(ADMIN_TOKEN, 'DELETE', `/admin/users/${made.body.user.id}`)).status).toBe(204)
    expect((await call(made.body.key.token, 'GET', '/v1/profiles')).status).toBe(401)
    expect((await call(ADMIN_TOKEN, 'DELETE', `/admin/users/${made.body.user.id}`)).status).toBe(404)
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
