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
import type { BerthClient, BerthError } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-creds-'))

const MASK = '••••••••'

let s: TestServer
let api: BerthClient
let owner: string
// The key the server generated into its data dir opens what it sealed.
let cipher: Cipher
/** The paths of the issues a refused call names. */
const paths = (err: BerthError) => ((err.details?.issues ?? []) as { path: string }[]).map((i) => i.path)

beforeAll(async () => {
  // Default address policy: private destinations refused.
  s = await startServer({ allowPrivateWebhooks: false, dataDir })
  const user = await s.user()
  api = clientFor(s, user.token)
  owner = user.id
  cipher = createAesGcmCipher(Buffer.from(readFileSync(join(dataDir, 'encryption.key'), 'utf8').trim(), 'base64'))
})
afterAll(async () => {
  await s.close()
  rmSync(dataDir, { recursive: true, force: true })
})

describe('MCP server credentials', () => {
  it('profile mcp_servers: env and headers are masked on read, encrypted at rest, kept by a mask on PATCH', async () => {
    const key = await api.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const created = await api.profiles.create({
      body: {
        name: 'MCP',
        slug: 'mcp',
        api_key_id: key.id,
        mcp_servers: {
          gh: { type: 'stdio', command: 'gh-mcp', env: { GH_TOKEN: 'ghp_secretvalue123' } },
          search: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: 'Bearer tok-987654' } },
        },
      },
    })
    expect(created.mcp_servers.gh).toMatchObject({ env: { GH_TOKEN: MASK } })
    expect(created.mcp_servers.search).toMatchObject({ headers: { Authorization: MASK } })
    const read = await api.profiles.get({ params: { id: created.id } })
    expect(JSON.stringify(read)).not.toContain('ghp_secretvalue123')
    const raw = await s.berth.services.profiles.records.get(owner, created.id)
    expect(JSON.stringify(raw)).not.toContain('ghp_secretvalue123')
    expect(JSON.stringify(raw)).not.toContain('tok-987654')

    // A mask keeps the stored value; a new value replaces it; a mask with nothing stored is a 400.
    await api.profiles.update({
      params: { id: created.id },
      body: {
        mcp_servers: {
          gh: { type: 'stdio', command: 'gh-mcp', env: { GH_TOKEN: MASK, EXTRA: 'new-value-1' } },
          search: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: MASK } },
        },
      },
    })
    const record = await s.berth.services.profiles.records.get(owner, created.id)
    expect(openServer(record.mcp_servers.gh!, cipher)).toMatchObject({
      env: { GH_TOKEN: 'ghp_secretvalue123', EXTRA: 'new-value-1' },
    })
    expect(openServer(record.mcp_servers.search!, cipher)).toMatchObject({
      headers: { Authorization: 'Bearer tok-987654' },
    })
    const orphan = await failure(
      api.profiles.update({
        params: { id: created.id },
        body: { mcp_servers: { other: { type: 'stdio', command: 'x', env: { T: MASK } } } },
      }),
    )
    expect(orphan.status).toBe(400)
    expect(paths(orphan)).toEqual(['mcp_servers.other.env.T'])
  })

  it('tools: the server’s headers are masked and kept by a mask on PATCH', async () => {
    const tool = await api.tools.create({
      body: {
        name: 'search',
        server: { type: 'http', url: 'https://mcp.example.test/', headers: { Authorization: 'Bearer tool-secret-1' } },
      },
    })
    expect(tool).toMatchObject({ server: { headers: { Authorization: MASK } } })
    const listed = await api.tools.list()
    expect(JSON.stringify(listed)).not.toContain('tool-secret-1')
    const patched = await api.tools.update({
      params: { id: tool.id },
      body: { server: { type: 'http', url: 'https://mcp2.example.test/', headers: { Authorization: MASK } } },
    })
    expect(patched.server).toEqual({
      type: 'http',
      url: 'https://mcp2.example.test/',
      headers: { Authorization: MASK },
    })
    const record = await s.berth.services.tools.records.get(owner, tool.id)
    expect(JSON.stringify(record)).not.toContain('tool-secret-1')
    expect(openServer(record.server, cipher)).toMatchObject({ headers: { Authorization: 'Bearer tool-secret-1' } })
  })
})

describe('model credential rules', () => {
  it('base_url follows the webhook address policy', async () => {
    for (const base_url of [
      'http://127.0.0.1:8080',
      'http://169.254.169.254/',
      'http://[::1]/',
      'http://10.0.0.8/v1',
    ]) {
      const err = await failure(api.apiKeys.create({ body: { name: 'x', provider: 'anthropic', key: 'k', base_url } }))
      expect(err.status, base_url).toBe(400)
      expect(paths(err)).toEqual(['base_url'])
    }
    const key = await api.apiKeys.create({ body: { name: 'x', provider: 'anthropic', key: 'k' } })
    const patched = await failure(
      api.apiKeys.update({ params: { id: key.id }, body: { base_url: 'http://192.168.1.1/' } }),
    )
    expect(patched.status).toBe(400)
    expect(paths(patched)).toEqual(['base_url'])
  })

  it('narrowing allowed_models under a profile’s model is refused; a credential in use cannot be deleted (409)', async () => {
    const key = await api.apiKeys.create({ body: { name: 'narrow', provider: 'stub' } })
    const profile = await api.profiles.create({
      body: { name: 'N', slug: 'narrow', api_key_id: key.id, model: 'claude-sonnet-4-5' },
    })
    const narrowed = await failure(
      api.apiKeys.update({ params: { id: key.id }, body: { allowed_models: ['claude-haiku-*'] } }),
    )
    expect(narrowed.status).toBe(400)
    expect(paths(narrowed)).toEqual(['allowed_models'])
    expect((await api.apiKeys.get({ params: { id: key.id } })).allowed_models).toBeNull()
    await api.apiKeys.update({ params: { id: key.id }, body: { allowed_models: ['claude-sonnet-*'] } })

    const del = await failure(api.apiKeys.delete({ params: { id: key.id } }))
    expect(del.status).toBe(409)
    expect(del).toMatchObject({ code: 'CONFLICT', details: { profile_ids: [profile.id] } })
    await api.apiKeys.get({ params: { id: key.id } })
    await api.profiles.delete({ params: { id: profile.id } })
    await api.apiKeys.delete({ params: { id: key.id } })
    expect((await failure(api.apiKeys.get({ params: { id: key.id } }))).status).toBe(404)
  })

  it('a workspace’s model_override must be a model its profile’s credential allows', async () => {
    const key = await api.apiKeys.create({ body: { name: 'ws', provider: 'stub', allowed_models: ['claude-haiku-*'] } })
    const profile = await api.profiles.create({ body: { name: 'W', slug: 'ws-override', api_key_id: key.id } })
    const ws = await s.berth.services.workspaces.create(owner, { profile_id: profile.id, persistent: false })
    const refused = await failure(
      api.workspaces.update({ params: { id: ws.id }, body: { model_override: 'claude-opus-4-5' } }),
    )
    expect(refused.status).toBe(400)
    expect(paths(refused)).toEqual(['model_override'])
    const ok = await api.workspaces.update({ params: { id: ws.id }, body: { model_override: 'claude-haiku-4-5' } })
    expect(ok.model_override).toBe('claude-haiku-4-5')
    expect(
      (await api.workspaces.update({ params: { id: ws.id }, body: { model_override: null } })).model_override,
    ).toBeNull()
  })
})
