// Response views are parses of the stored record through the response schema: stored
// secrets, hashes and internal fields never reach an answer.
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import * as v from 'valibot'
import {
  ApiKey,
  Integration,
  Playbook,
  ProfileSummary,
  SECRET_MASK,
  createAesGcmCipher,
  newId,
  systemClock,
  type Store,
} from '../src/index.js'
import { ApiKeysService } from '../src/resources/api-keys.js'
import { GitAccount } from '@berth/contract'
import { GitAccountsService, type GitAccountRecord } from '../src/integrations/git-accounts.js'
import { IntegrationsService, type IntegrationRecord } from '../src/integrations/integrations.js'
import { sealConfig } from '../src/integrations/integration-config.js'
import { PlaybooksService } from '../src/playbooks/playbooks.js'
import type { PlaybookRecord } from '../src/playbooks/record.js'
import { ProfilesService } from '../src/resources/profiles.js'
import { UsersService, hashKey } from '../src/resources/users.js'
import { taskView, type TaskRecord } from '../src/tasks/task.js'
import type { ApiKeyRecord } from '../src/resources/api-keys.js'
import { createSecretsService, type SecretRecord } from '../src/resources/catalog.js'
import type { ProfileRecord } from '../src/resources/profiles.js'
import { toView } from '../src/records/view.js'

// The views read nothing from the store; every service only keeps it.
const store = {} as Store
const cipher = createAesGcmCipher(randomBytes(32))
const now = '2026-01-02T03:04:05.000Z'
const owner = { owner_id: 'usr_owner', created_at: now, updated_at: now }
/** A field no schema lists, as a later version might store beside the API fields. */
const internal = { internal_note: 'INTERNAL-ONLY' }

function leaks(view: unknown, ...secrets: string[]): string[] {
  const json = JSON.stringify(view)
  return [...secrets, 'INTERNAL-ONLY', 'usr_owner'].filter((s) => json.includes(s))
}

describe('record views', () => {
  it('api keys: no ciphertext, has_key computed, the schema holds', () => {
    const keys = new ApiKeysService(store, cipher, systemClock, null as never)
    const sealed = cipher.encrypt('sk-ant-secret')
    const record: ApiKeyRecord = {
      ...owner,
      ...internal,
      id: newId('apiKey'),
      name: 'Main',
      provider: 'anthropic',
      base_url: null,
      allowed_models: null,
      key_encrypted: sealed,
    }
    const view = keys.view(record)
    // A record from before Bedrock and Vertex: their fields read as unset.
    expect(view).toEqual({
      id: record.id,
      name: 'Main',
      provider: 'anthropic',
      base_url: null,
      allowed_models: null,
      has_key: true,
      has_session_token: false,
      aws_access_key_id: null,
      aws_region: null,
      gcp_client_email: null,
      gcp_project_id: null,
      gcp_region: null,
      model_map: null,
      created_at: now,
      updated_at: now,
    })
    expect(leaks(view, sealed, 'key_encrypted')).toEqual([])
    expect(v.is(ApiKey, view)).toBe(true)
    expect(keys.view({ ...record, key_encrypted: null }).has_key).toBe(false)
    // Bedrock: the secret and the session token stay out; their presence shows.
    const token = cipher.encrypt('FwoGZXIvYXdzEXAMPLE')
    const bedrock = keys.view({
      ...record,
      provider: 'bedrock',
      aws_access_key_id: 'AKIAIOSFODNN7EXAMPLE',
      aws_region: 'us-east-1',
      session_token_encrypted: token,
    })
    expect(bedrock).toMatchObject({ has_key: true, has_session_token: true, aws_access_key_id: 'AKIAIOSFODNN7EXAMPLE' })
    expect(leaks(bedrock, sealed, 'key_encrypted')).toEqual([])
    expect(leaks(bedrock, token, 'session_token_encrypted')).toEqual([])
    expect(v.is(ApiKey, bedrock)).toBe(true)
  })

  it('playbooks: no webhook secret hash; the secret only when given', () => {
    const playbooks = new PlaybooksService(store, systemClock, null as never, null as never)
    const hash = 'a'.repeat(64)
    const record: PlaybookRecord = {
      ...owner,
      ...internal,
      id: newId('playbook'),
      profile_id: newId('profile'),
      name: 'Nightly',
      description: '',
      prompt: 'Run the report.',
      trigger_type: 'webhook',
      max_turns: null,
      max_budget_usd: 2,
      allowed_tools: null,
      webhook_secret_hash: hash,
    }
    const view = playbooks.view(record)
    expect(leaks(view, hash, 'webhook_secret_hash')).toEqual([])
    expect(view).not.toHaveProperty('webhook_secret')
    expect(view).toMatchObject({
      has_webhook_secret: true,
      webhook_path: expect.stringContaining(record.id),
      max_turns: null,
      max_budget_usd: 2,
    })
    expect(v.is(Playbook, view)).toBe(true)
    expect(playbooks.view(record, 'whsec_once').webhook_secret).toBe('whsec_once')
    expect(playbooks.view({ ...record, trigger_type: 'manual', webhook_secret_hash: null })).toMatchObject({
      has_webhook_secret: false,
      webhook_path: null,
    })
  })

  it('integrations: sealed config fields read as the mask; a record without status is connected', () => {
    const integrations = new IntegrationsService(store, systemClock, cipher, null as never, null as never)
    const config = sealConfig({ url: 'https://hooks.example.com/x', secret: 'whsec-plain' }, cipher)
    const record: IntegrationRecord = {
      ...owner,
      ...internal,
      id: newId('integration'),
      type: 'webhook',
      config,
      enabled: true,
      is_default: false,
      scope: 'all',
      profile_ids: [],
    }
    const view = integrations.view(record)
    expect(view.config).toEqual({ url: 'https://hooks.example.com/x', secret: SECRET_MASK })
    expect(view.status).toBe('connected')
    expect(leaks(view, 'whsec-plain', String(config.secret))).toEqual([])
    expect(v.is(Integration, view)).toBe(true)
  })

  it('git accounts: no tokens, no provider user id', () => {
    const accounts = new GitAccountsService({ store } as never)
    const access = cipher.encrypt('gho_access')
    const refresh = cipher.encrypt('ghr_refresh')
    const record: GitAccountRecord = {
      ...owner,
      ...internal,
      id: newId('gitAccount'),
      provider: 'github',
      login: 'octo',
      provider_user_id: 'gh-user-4242',
      scopes: ['repo'],
      status: 'connected',
      access_token_encrypted: access,
      refresh_token_encrypted: refresh,
      expires_at: 1_900_000_000_000,
    }
    const view = accounts.view(record)
    expect(view).toEqual({
      id: record.id,
      provider: 'github',
      login: 'octo',
      scopes: ['repo'],
      status: 'connected',
      created_at: now,
      updated_at: now,
    })
    expect(leaks(view, access, refresh, 'gh-user-4242')).toEqual([])
    expect(v.is(GitAccount, view)).toBe(true)
  })

  it('secrets: never the value; profiles: MCP credentials masked, old records get the defaults', async () => {
    const sealed = cipher.encrypt('ghp_value')
    const secret: SecretRecord = {
      ...owner,
      ...internal,
      id: newId('secret'),
      name: 'GITHUB_TOKEN',
      scope: 'all',
      profile_ids: [],
      value_encrypted: sealed,
    }
    // A store holding just this record: `get` answers through the kind's view.
    const one = {
      get: async (key: string) => (key === `secrets:${owner.owner_id}:${secret.id}` ? secret : null),
    } as unknown as Store
    const view = await createSecretsService(one, systemClock, cipher).get(owner.owner_id, secret.id)
    expect(view).toEqual({
      id: secret.id,
      name: 'GITHUB_TOKEN',
      scope: 'all',
      profile_ids: [],
      // A record from before delivery modes reads as an env secret.
      delivery: 'env',
      hosts: [],
      created_at: now,
      updated_at: now,
    })
    expect(leaks(view, sealed)).toEqual([])

    const profiles = new ProfilesService(store, systemClock, null as never, cipher, null as never)
    const header = cipher.encrypt('Bearer tok')
    const profile = {
      ...owner,
      ...internal,
      id: newId('profile'),
      name: 'Docs',
      slug: 'docs',
      api_key_id: newId('apiKey'),
      description: '',
      model: null,
      default_tools: [],
      mcp_servers: { search: { type: 'http', url: 'https://mcp.example.com', headers: { Authorization: header } } },
      claude_md: '# Docs',
      memory_enabled: false,
      persistent_sessions: false,
      // A record written before Git accounts and environments: the view fills the defaults.
    } as unknown as ProfileRecord
    const summary = profiles.summary(profile)
    expect(summary).toMatchObject({
      git_account_ids: [],
      environment_id: null,
      mcp_servers: { search: { headers: { Authorization: SECRET_MASK } } },
    })
    expect(summary).not.toHaveProperty('claude_md')
    expect(leaks(summary, header, 'Bearer tok')).toEqual([])
    expect(v.is(ProfileSummary, summary)).toBe(true)
  })
  it('tasks: the API fields only (no instance, slot or owner), a batch task has no session id', () => {
    const at = '2026-01-01T00:00:00.000Z'
    const record = {
      id: newId('task'),
      owner_id: 'usr_1',
      status: 'completed',
      mode: 'batch',
      profile_id: newId('profile'),
      priority: 'normal',
      prompt: 'Hi',
      session_id: newId('session'),
      workspace_id: newId('workspace'),
      created_at: at,
      updated_at: at,
      started_at: at,
      finished_at: at,
      result: null,
      error: null,
      slot_pending: true,
      instance_id: 'host-a',
    } as unknown as TaskRecord
    const view = taskView(record) as Record<string, unknown>
    expect(view.task_id).toBe(record.id)
    expect(view.session_id).toBeNull()
    for (const key of ['id', 'owner_id', 'slot_pending', 'instance_id', 'updated_at'])
      expect(view).not.toHaveProperty(key)
    expect(taskView({ ...record, mode: 'session' } as TaskRecord).session_id).toBe(record.session_id)
  })
})

describe('caller key views', () => {
  it('never carry the key hash; the token only in the answer that issues it', async () => {
    // A map of keys is all the users service needs for issuing and listing keys.
    const data = new Map<string, unknown>()
    const mapStore = {
      get: async (k: string) => data.get(k) ?? null,
      getMany: async (ks: string[]) => ks.map((k) => data.get(k) ?? null),
      set: async (k: string, value: unknown) => void data.set(k, value),
      keys: async (prefix: string) => [...data.keys()].filter((k) => k.startsWith(prefix)),
    } as unknown as Store
    const users = new UsersService({ store: mapStore, clock: systemClock })
    data.set('users:usr_owner', { id: 'usr_owner', name: 'me', role: 'user', created_at: now })
    const issued = await users.issueKey('usr_owner', { name: 'ci' })
    const hash = hashKey(issued.token)
    expect(JSON.stringify(issued)).not.toContain(hash)
    expect(Object.keys(issued).sort()).toEqual(['created_at', 'id', 'last_used_at', 'name', 'token', 'user_id'])
    const { items } = await users.listKeys('usr_owner', { page: 1, limit: 20 })
    expect(items).toEqual([
      { id: issued.id, user_id: 'usr_owner', name: 'ci', created_at: issued.created_at, last_used_at: null },
    ])
    expect(JSON.stringify(items)).not.toContain(hash)
  })
})

describe('toView', () => {
  const Item = v.object({
    id: v.string(),
    size: v.nullable(v.number()),
    note: v.optional(v.string()),
    inner: v.object({ a: v.number() }),
  })

  it('keeps the listed keys (nested too), lets extra win and leaves absent optionals absent', () => {
    const view = toView(Item, { id: 'x', size: 1, inner: { a: 1, hidden: 'h' }, token: 't' }, { size: null })
    expect(view).toEqual({ id: 'x', size: null, inner: { a: 1 } })
    expect(Object.keys(view)).not.toContain('note')
  })

  it('answers a record the schema rejects with the schema’s top-level keys only', () => {
    // An older record: `size` missing, `id` of the wrong type. Today's copy, no secrets.
    const view = toView(Item, { id: 7, inner: { a: 1 }, token: 't' } as object)
    expect(view).toEqual({ id: 7, inner: { a: 1 } })
    expect(JSON.stringify(view)).not.toContain('token')
  })
})
