/**
 * The audit log over HTTP: every listed action leaves an entry with its actor, target,
 * outcome, request id and source address; no secret value, key or credential reaches the
 * log or its answers; filters, paging and ownership; failed authentication per address and minute.
 */
import type { AuditEntry } from '@berth/contract'
import { indexEntryFor } from '@berth/core'
import WebSocket from 'ws'
import type { BerthClient } from '@berth/client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'

const CREDENTIAL_KEY = 'sk-ant-audit-credential-0123456789abcdef'
const ROTATED_KEY = 'sk-ant-audit-rotated-fedcba9876543210'
const SECRET_VALUE = 'audit-secret-value-4f1e2d3c'
const CHANGED_VALUE = 'audit-secret-changed-9a8b7c6d'
const WEBHOOK_SECRET = 'whsec-audit-7a6b5c4d3e'
const GIT_TOKEN = 'gho_audit_access_token_12345'
const GIT_REFRESH = 'ghr_audit_refresh_token_67890'
const REQUEST_ID = 'audit-test-request-1'

let s: TestServer
let a: { token: string; id: string }
let b: { token: string; id: string }
let extraKey: string
/** The text of every API answer the test read. */
const seen: string[] = []
let admin: BerthClient
let apiA: BerthClient

/** Every entry of the deployment's log, newest first (as the admin reads it). */
async function adminEntries(query: Record<string, string> = {}): Promise<AuditEntry[]> {
  const { entries } = await admin.admin.audit.list({ query: { limit: 100, ...query } })
  return entries
}

/** The one entry of `action` on `target` in the deployment's log. */
async function entryFor(action: AuditEntry['action'], target: string): Promise<AuditEntry> {
  const found = (await adminEntries({ action })).filter((e) => e.target.id === target)
  expect(found, `${action} ${target}`).toHaveLength(1)
  return found[0]!
}

beforeAll(async () => {
  s = await startServer({ allowPrivateWebhooks: true })
  admin = clientFor(s, ADMIN_TOKEN, seen)
  a = await s.user('A')
  b = await s.user('B')
  apiA = clientFor(s, a.token, seen)
  extraKey = (await admin.admin.keys.create({ params: { id: a.id }, body: { name: 'ci' } })).token
})
afterAll(() => s.close())

describe('audit log over HTTP', () => {
  it('records users and keys created, issued, revoked and deleted, by the operator', async () => {
    const created = await entryFor('user.created', a.id)
    expect(created).toMatchObject({ actor: { type: 'admin', id: 'usr_operator' }, outcome: 'success' })
    expect(created.request_id).toMatch(/^req_/)
    expect(created.source).toMatch(/127\.0\.0\.1/)
    const keys = await admin.admin.keys.list({ params: { id: a.id } })
    const ci = keys.keys.find((k) => k.name === 'ci')!
    await entryFor('key.issued', ci.id)
    const res = await s.request(`/admin/keys/${ci.id}`, {
      method: 'DELETE',
      token: ADMIN_TOKEN,
      headers: { 'x-request-id': REQUEST_ID },
    })
    expect(res.status).toBe(204)
    expect(res.headers.get('x-request-id')).toBe(REQUEST_ID)
    expect(await entryFor('key.revoked', ci.id)).toMatchObject({
      request_id: REQUEST_ID,
      actor: { id: 'usr_operator' },
    })
    const gone = await s.user('Gone')
    await admin.admin.users.delete({ params: { id: gone.id } })
    await entryFor('user.deleted', gone.id)
  })

  it('records model credentials, secrets, environments and integrations created, changed and removed, by their owner', async () => {
    const cred = await apiA.apiKeys.create({ body: { name: 'prod', provider: 'anthropic', key: CREDENTIAL_KEY } })
    await apiA.apiKeys.update({ params: { id: cred.id }, body: { key: ROTATED_KEY } })
    await apiA.apiKeys.delete({ params: { id: cred.id } })
    const secret = await apiA.secrets.create({ body: { name: 'DEPLOY_TOKEN', value: SECRET_VALUE } })
    await apiA.secrets.update({ params: { id: secret.id }, body: { value: CHANGED_VALUE } })
    await apiA.secrets.delete({ params: { id: secret.id } })
    const env = await apiA.environments.create({ body: { name: 'build' } })
    await apiA.environments.update({ params: { id: env.id }, body: { description: 'changed' } })
    await apiA.environments.delete({ params: { id: env.id } })
    const hook = await apiA.integrations.create({
      body: { type: 'webhook', config: { url: 'http://127.0.0.1:9/hook', secret: WEBHOOK_SECRET } },
    })
    await apiA.integrations.update({ params: { id: hook.id }, body: { enabled: false } })
    await apiA.integrations.delete({ params: { id: hook.id } })
    for (const [kind, id] of [
      ['credential', cred.id],
      ['secret', secret.id],
      ['environment', env.id],
      ['integration', hook.id],
    ] as const) {
      for (const change of ['created', 'updated', 'deleted'] as const) {
        const entry = await entryFor(`${kind}.${change}`, id)
        expect(entry).toMatchObject({ actor: { type: 'user', id: a.id }, target: { type: kind }, outcome: 'success' })
        expect(entry.request_id).toMatch(/^req_/)
        expect(entry.source).toMatch(/127\.0\.0\.1/)
      }
    }
  })

  it('records a Git account connected (by its owner, through the OAuth callback) and disconnected', async () => {
    const account = await s.berth.services.gitAccounts.connect(
      a.id,
      'github',
      { access_token: GIT_TOKEN, refresh_token: GIT_REFRESH, expires_at: null, scopes: ['repo'] },
      { id: '4242', login: 'ada' },
    )
    expect(await entryFor('git_account.connected', account.id)).toMatchObject({
      actor: { type: 'user', id: a.id },
      details: { provider: 'github' },
    })
    await apiA.git.accounts.delete({ params: { id: account.id } })
    expect(await entryFor('git_account.disconnected', account.id)).toMatchObject({ actor: { id: a.id } })
  })

  it('records an approval decided over HTTP, with its request id and address', async () => {
    // A running task with a pending permission request, stored as the run stores them.
    const at = new Date(s.clock.now()).toISOString()
    const task = { id: 'task_auditapproval01', owner_id: a.id, status: 'running', mode: 'batch', created_at: at }
    const approval = {
      id: 'apr_auditapproval01',
      owner_id: a.id,
      task_id: task.id,
      tool: 'Bash',
      input: { command: 'ls' },
      status: 'pending',
      created_at: at,
      updated_at: at,
      expires_at: new Date(s.clock.now() + 600_000).toISOString(),
      decided_at: null,
      message: null,
    }
    for (const [key, value] of [
      [`tasks:${a.id}:${task.id}`, task],
      [`approvals:${a.id}:${approval.id}`, approval],
    ] as const)
      await s.berth.store.put(key, value, indexEntryFor(key, value)!)
    const res = await s.request(`/v1/tasks/${task.id}/approvals/${approval.id}`, {
      method: 'POST',
      token: a.token,
      json: { decision: 'deny', message: 'not today' },
      headers: { 'x-request-id': 'audit-approval-1' },
    })
    expect(res.status).toBe(200)
    const entry = await entryFor('approval.decided', approval.id)
    expect(entry).toMatchObject({
      actor: { type: 'user', id: a.id },
      request_id: 'audit-approval-1',
      details: { task_id: task.id, decision: 'deny', tool: 'Bash' },
    })
    expect(entry.source).toMatch(/127\.0\.0\.1/)
  })

  it('counts failed authentication per address and minute, and records a forbidden admin call', async () => {
    for (const token of ['berth_sk_wrong', a.token.slice(0, -1), '']) {
      expect((await s.request('/v1/profiles', { token })).status).toBe(401)
    }
    // A WebSocket upgrade with a bad key counts too.
    const socket = new WebSocket(`${s.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: 'Bearer berth_sk_wrong', 'x-berth-client-address': '192.0.2.99' },
    })
    const refused = await new Promise<number>((resolve, reject) => {
      socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
      socket.once('open', () => reject(new Error('a bad key opened a socket')))
    })
    socket.on('error', () => {})
    socket.terminate()
    expect(refused).toBe(401)
    await s.berth.services.audit.flush()
    const failed = await adminEntries({ action: 'auth.failed' })
    expect(failed).toHaveLength(1)
    expect(failed[0]).toMatchObject({
      actor: { type: 'anonymous', id: null },
      outcome: 'failure',
      details: { count: 4 },
    })
    expect(failed[0]!.source).toMatch(/127\.0\.0\.1/)
    expect(failed[0]!.target).toEqual({ type: 'address', id: failed[0]!.source })

    const forbidden = await failure(clientFor(s, b.token).admin.audit.list({ query: {} }))
    expect(forbidden.status).toBe(403)
    const denied = await adminEntries({ action: 'auth.forbidden', actor: b.id })
    expect(denied.map((e) => [e.target.id, e.outcome])).toEqual([['admin.audit.list', 'failure']])
  })

  it('a caller lists its own entries only, with the same filters and paging', async () => {
    const own = await apiA.audit.list({ query: { limit: 100 } })
    expect(own.total).toBe(own.entries.length)
    expect(own.entries.every((e) => e.actor.id === a.id || e.target.id === a.id || e.actor.id === 'usr_operator')).toBe(
      true,
    )
    // What the operator did to A's user is A's to see; B's denied admin call is not.
    expect(own.entries.map((e) => e.action)).toEqual(
      expect.arrayContaining(['user.created', 'key.revoked', 'secret.deleted']),
    )
    expect(own.entries.some((e) => e.actor.id === b.id)).toBe(false)
    // ...and not the address the operator acted from.
    const byOperator = own.entries.filter((e) => e.actor.id === 'usr_operator')
    expect(byOperator.length).toBeGreaterThan(0)
    expect(byOperator.every((e) => e.source === null)).toBe(true)
    expect(own.entries.find((e) => e.actor.id === a.id)?.source).toMatch(/127\.0\.0\.1/)
    const ofB = await clientFor(s, b.token).audit.list({ query: {} })
    expect(ofB.entries.map((e) => e.action).sort()).toEqual(['auth.forbidden', 'key.issued', 'user.created'])

    const secrets = await apiA.audit.list({ query: { action: 'secret.updated' } })
    expect(secrets.entries.map((e) => e.action)).toEqual(['secret.updated'])
    const page1 = await apiA.audit.list({ query: { limit: 2 } })
    const page2 = await apiA.audit.list({ query: { limit: 2, page: 2 } })
    expect(page1.total).toBe(own.total)
    expect([...page1.entries, ...page2.entries]).toEqual(own.entries.slice(0, 4))
    const times = own.entries.map((e) => e.at)
    expect([...times].sort().reverse()).toEqual(times)
    expect((await apiA.audit.list({ query: { from: '2030-01-01T00:00:00Z' } })).total).toBe(0)
    expect((await apiA.audit.list({ query: { actor: b.id } })).total).toBe(0)

    for (const query of ['action=secret.stolen', 'from=yesterday', 'actor=a,b', 'target=x%3Dy']) {
      const res = await s.request(`/v1/audit?${query}`, { token: a.token })
      expect(res.status, query).toBe(400)
      expect(((await res.json()) as { code: string }).code).toBe('VALIDATION_FAILED')
    }
  })

  it('holds no secret value, credential key, token or caller key, in the store or in any answer', async () => {
    const keys = [...(await s.berth.store.keys('audit:')), ...(await s.berth.store.keys('audit-own:'))]
    expect(keys.length).toBeGreaterThan(20)
    const stored = JSON.stringify(await s.berth.store.getMany(keys))
    const answers = seen.filter((text) => text.includes('"entries"')).join('\n')
    expect(answers.length).toBeGreaterThan(1000)
    for (const value of [
      CREDENTIAL_KEY,
      ROTATED_KEY,
      SECRET_VALUE,
      CHANGED_VALUE,
      WEBHOOK_SECRET,
      GIT_TOKEN,
      GIT_REFRESH,
      ADMIN_TOKEN,
      a.token,
      b.token,
      extraKey,
    ]) {
      expect(stored.includes(value), value).toBe(false)
      expect(answers.includes(value), value).toBe(false)
    }
  })
})
