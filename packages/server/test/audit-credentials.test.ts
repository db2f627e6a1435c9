/**
 * Credentials after the audit: MCP `env` and `headers` values are sealed and masked like
 * integration secrets; a model credential's `base_url` follows the webhook address policy;
 * model rules hold where a model is set (workspace override, narrowed allow-list) and a
 * credential in use cannot be deleted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createAesGcmCipher, type Cipher } from '@berth/core'
import { openServer } from '../../core/src/resources/mcp-secrets.js'
import { startServer, type TestServer, type Json } from './helpers.js'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-creds-'))

const MASK = '••••••••'

let s: TestServer
let token: string
let owner: string
// The key the server generated into its data dir opens what it sealed.
let cipher: Cipher
const call = async (method: string, path: string, json?: unknown) => {
  const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
  const text = await res.text()
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json }
}
const paths = (body: Json) => (body.details?.issues ?? []).map((i: Json) => i.path)

beforeAll(async () => {
  // Default address policy: private destinations refused.
  s = await startServer({ allowPrivateWebhooks: false, dataDir })
  ;({ token, id: owner } = await s.user())
  cipher = createAesGcmCipher(Buffer.from(readFileSync(join(dataDir, 'encryption.key'), 'utf8').trim(), 'base64'))
})
afterAll(async () => {
  await s.close()
  rmSync(dataDir, { recursive: true, force: true })
})

describe('MCP server credentials', () => {
  it('profile mcp_servers: env and headers are masked on read, encrypted at rest, kept by a mask on PATCH', async () => {
    const key = (await call('POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body
    const created = await call('POST', '/v1/profiles', {
      name: 'MCP',
      slug: 'mcp',
      api_key_id: key.id,
      mcp_servers: {
        gh: { type: 'stdio', command: 'gh-mcp', env: { GH_TOKEN: 'ghp_secretvalue123' } },
        search: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: 'Bearer tok-987654' } },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body.mcp_servers.gh.env).toEqual({ GH_TOKEN: MASK })
    expect(created.body.mcp_servers.search.headers).toEqual({ Authorization: MASK })
    const read = await call('GET', `/v1/profiles/${created.body.id}`)
    expect(JSON.stringify(read.body)).not.toContain('ghp_secretvalue123')
    const raw = await s.berth.services.profiles.records.get(owner, created.body.id)
    expect(JSON.stringify(raw)).not.toContain('ghp_secretvalue123')
    expect(JSON.stringify(raw)).not.toContain('tok-987654')

    // A mask keeps the stored value; a new value replaces it; a mask with nothing stored is a 400.
    const patched = await call('PATCH', `/v1/profiles/${created.body.id}`, {
      mcp_servers: {
        gh: { type: 'stdio', command: 'gh-mcp', env: { GH_TOKEN: MASK, EXTRA: 'new-value-1' } },
        search: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: MASK } },
      },
    })
    expect(patched.status, JSON.stringify(patched.body)).toBe(200)
    const record = await s.berth.services.profiles.records.get(owner, created.body.id)
    expect(openServer(record.mcp_servers.gh!, cipher)).toMatchObject({ env: { GH_TOKEN: 'ghp_secretvalue123', EXTRA: 'new-value-1' } })
    expect(openServer(record.mcp_servers.search!, cipher)).toMatchObject({ headers: { Authorization: 'Bearer tok-987654' } })
    const orphan = await call('PATCH', `/v1/profiles/${created.body.id}`, { mcp_servers: { other: { type: 'stdio', command: 'x', env: { T: MASK } } } })
    expect(orphan.status).toBe(400)
    expect(paths(orphan.body)).toEqual(['mcp_servers.other.env.T'])
  })

  it('tools: the server’s headers are masked and kept by a mask on PATCH', async () => {
    const tool = await call('POST', '/v1/tools', { name: 'search', server: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: 'Bearer tool-secret-1' } } })
    expect(tool.status).toBe(201)
    expect(tool.body.server.headers).toEqual({ Authorization: MASK })
    const listed = await call('GET', '/v1/tools')
    expect(JSON.stringify(listed.body)).not.toContain('tool-secret-1')
    const patched = await call('PATCH', `/v1/tools/${tool.body.id}`, { server: { type: 'http', url: 'https://mcp2.example.test/', headers: { Authorization: MASK } } })
    expect(patched.status).toBe(200)
    expect(patched.body.server).toEqual({ type: 'http', url: 'https://mcp2.example.test/', headers: { Authorization: MASK } })
    const record = await s.berth.services.tools.records.get(owner, tool.body.id)
    expect(JSON.stringify(record)).not.toContain('tool-secret-1')
    expect(openServer(record.server, cipher)).toMatchObject({ headers: { Authorization: 'Bearer tool-secret-1' } })
  })
})

describe('model credential rules', () => {
  it('base_url follows the webhook address policy', async () => {
    for (const base_url of ['http://127.0.0.1:8080', 'http://169.254.169.254/', 'http://[::1]/', 'http://10.0.0.8/v1']) {
      const res = await call('POST', '/v1/api-keys', { name: 'x', provider: 'anthropic', key: 'k', base_url })
      expect(res.status, base_url).toBe(400)
      expect(paths(res.body)).toEqual(['base_url'])
    }
    const key = (await call('POST', '/v1/api-keys', { name: 'x', provider: 'anthropic', key: 'k' })).body
    const patched = await call('PATCH', `/v1/api-keys/${key.id}`, { base_url: 'http://192.168.1.1/' })
    expect(patched.status).toBe(400)
    expect(paths(patched.body)).toEqual(['base_url'])
  })

  it('narrowing allowed_models under a profile’s model is refused; a credential in use cannot be deleted (409)', async () => {
    const key = (await call('POST', '/v1/api-keys', { name: 'narrow', provider: 'stub' })).body
    const profile = (await call('POST', '/v1/profiles', { name: 'N', slug: 'narrow', api_key_id: key.id, model: 'claude-sonnet-4-5' })).body
    const narrowed = await call('PATCH', `/v1/api-keys/${key.id}`, { allowed_models: ['claude-haiku-*'] })
    expect(narrowed.status).toBe(400)
    expect(paths(narrowed.body)).toEqual(['allowed_models'])
    expect((await call('GET', `/v1/api-keys/${key.id}`)).body.allowed_models).toBeNull()
    expect((await call('PATCH', `/v1/api-keys/${key.id}`, { allowed_models: ['claude-sonnet-*'] })).status).toBe(200)

    const del = await call('DELETE', `/v1/api-keys/${key.id}`)
    expect(del.status).toBe(409)
    expect(del.body).toMatchObject({ code: 'CONFLICT', details: { profile_ids: [profile.id] } })
    expect((await call('GET', `/v1/api-keys/${key.id}`)).status).toBe(200)
    expect((await call('DELETE', `/v1/profiles/${profile.id}`)).status).toBe(204)
    expect((await call('DELETE', `/v1/api-keys/${key.id}`)).status).toBe(204)
  })

  it('a workspace’s model_override must be a model its profile’s credential allows', async () => {
    const key = (await call('POST', '/v1/api-keys', { name: 'ws', provider: 'stub', allowed_models: ['claude-haiku-*'] })).body
    const profile = (await call('POST', '/v1/profiles', { name: 'W', slug: 'ws-override', api_key_id: key.id })).body
    const ws = await s.berth.services.workspaces.create(owner, { profile_id: profile.id, persistent: false })
    const refused = await call('PATCH', `/v1/workspaces/${ws.id}`, { model_override: 'claude-opus-4-5' })
    expect(refused.status).toBe(400)
    expect(paths(refused.body)).toEqual(['model_override'])
    const ok = await call('PATCH', `/v1/workspaces/${ws.id}`, { model_override: 'claude-haiku-4-5' })
    expect(ok.status).toBe(200)
    expect(ok.body.model_override).toBe('claude-haiku-4-5')
    expect((await call('PATCH', `/v1/workspaces/${ws.id}`, { model_override: null })).body.model_override).toBeNull()
  })
})

