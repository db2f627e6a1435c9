/**
 * The audit log's later actions over HTTP and the WebSocket (issue 41): profiles, tools,
 * skills, agents, memory and playbooks changed, limits set; 404s for ids a caller does not
 * have (another caller's, or none), counted per caller, kind and minute without naming the
 * other owner; decisions that lost a race (409) recorded as failures.
 */
import type { AuditEntry } from '@berth/contract'
import { indexEntryFor } from '@berth/core'
import type { BerthClient } from '@berth/client'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'
import { socketOf } from './steering.helpers.js'

let s: TestServer
let a: { token: string; id: string }
let b: { token: string; id: string }
let admin: BerthClient
let apiA: BerthClient
let apiB: BerthClient

/** The deployment's entries of `action` (as the operator reads them), after the counted ones are written. */
async function entries(action: AuditEntry['action']): Promise<AuditEntry[]> {
  await s.berth.services.audit.flush()
  return (await admin.admin.audit.list({ query: { action, limit: 100 } })).entries
}

/** A running task of `owner` with a pending permission request, stored as a run stores them. */
async function pendingApproval(owner: string, suffix: string) {
  const at = new Date(s.clock.now()).toISOString()
  const task = { id: `task_audit${suffix}`, owner_id: owner, status: 'running', mode: 'batch', created_at: at }
  const approval = {
    id: `apr_audit${suffix}`,
    owner_id: owner,
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
    [`tasks:${owner}:${task.id}`, task],
    [`approvals:${owner}:${approval.id}`, approval],
  ] as const)
    await s.berth.store.put(key, value, indexEntryFor(key, value)!)
  return { task_id: task.id, request_id: approval.id }
}

beforeAll(async () => {
  s = await startServer()
  admin = clientFor(s, ADMIN_TOKEN)
  a = await s.user('A')
  b = await s.user('B')
  apiA = clientFor(s, a.token)
  apiB = clientFor(s, b.token)
})
afterAll(() => s.close())

describe('changes', () => {
  it('records profiles, tools, skills, agents, memory and playbooks created, changed and removed, and limits set', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    const profile = await apiA.profiles.create({ body: { name: 'Audited', slug: 'audited', api_key_id: key.id } })
    await apiA.profiles.update({ params: { id: profile.id }, body: { name: 'Audited again' } })
    const tool = await apiA.tools.create({
      body: { name: 'search', server: { type: 'http', url: 'https://mcp.test/' } },
    })
    await apiA.tools.update({ params: { id: tool.id }, body: { name: 'search2' } })
    await apiA.tools.delete({ params: { id: tool.id } })
    const skill = await apiA.skills.create({ body: { name: 'skill', body: '# Skill' } })
    await apiA.skills.update({ params: { id: skill.id }, body: { body: '# Changed' } })
    await apiA.skills.delete({ params: { id: skill.id } })
    const agent = await apiA.agents.create({ body: { name: 'helper', prompt: 'Help.' } })
    await apiA.agents.update({ params: { id: agent.id }, body: { prompt: 'Help more.' } })
    await apiA.agents.delete({ params: { id: agent.id } })
    const memory = await apiA.memory.create({ body: { type: 'fact', name: 'm', body: 'x' } })
    await apiA.memory.update({ params: { id: memory.id }, body: { body: 'y' } })
    await apiA.memory.delete({ params: { id: memory.id } })
    const pb = await apiA.playbooks.create({
      body: { profile_id: profile.id, name: 'Nightly', prompt: 'Go.', trigger_type: 'webhook' },
    })
    await apiA.playbooks.update({ params: { id: pb.id }, body: { name: 'Nightly 2' } })
    const rotated = await apiA.playbooks.rotateWebhookSecret({ params: { id: pb.id } })
    await apiA.playbooks.delete({ params: { id: pb.id } })
    await apiA.profiles.delete({ params: { id: profile.id } })
    await admin.admin.limits.set({ params: { id: b.id }, body: { max_running: 2 } })

    const own = (await apiA.audit.list({ query: { limit: 100 } })).entries
    const of = (id: string) =>
      own
        .filter((e) => e.target.id === id)
        .map((e) => e.action)
        .sort()
    expect(of(profile.id)).toEqual(['profile.created', 'profile.deleted', 'profile.updated'])
    for (const [kind, id] of [
      ['tool', tool.id],
      ['skill', skill.id],
      ['agent', agent.id],
      ['memory', memory.id],
    ] as const)
      expect(of(id), kind).toEqual([`${kind}.created`, `${kind}.deleted`, `${kind}.updated`])
    expect(of(pb.id)).toEqual([
      'playbook.created',
      'playbook.deleted',
      'playbook.updated',
      'playbook.webhook_secret_rotated',
    ])
    const byA = own.filter((e) => e.actor.id === a.id)
    expect(byA.length).toBeGreaterThanOrEqual(20)
    expect(byA.every((e) => e.outcome === 'success' && e.source?.includes('127.0.0.1'))).toBe(true)
    // The webhook secret is in its answer only, never in the log.
    expect(JSON.stringify(own)).not.toContain(rotated.webhook_secret)
    // What the operator set for B is B's to see too.
    expect((await apiB.audit.list({ query: { action: 'limits.set' } })).entries).toEqual([
      expect.objectContaining({ actor: { type: 'admin', id: 'usr_operator' }, target: { type: 'user', id: b.id } }),
    ])
  })

  it('a change refused with 409 is recorded as a failure', async () => {
    const key = await apiA.apiKeys.create({ body: { name: 'in use', provider: 'stub' } })
    await apiA.profiles.create({ body: { name: 'User', slug: 'user', api_key_id: key.id } })
    expect((await failure(apiA.apiKeys.delete({ params: { id: key.id } }))).status).toBe(409)
    const deleted = (await entries('credential.deleted')).filter((e) => e.target.id === key.id)
    expect(deleted).toEqual([
      expect.objectContaining({ outcome: 'failure', actor: { type: 'user', id: a.id }, details: expect.anything() }),
    ])
    expect(deleted[0]!.details?.error).toMatch(/profile/)
  })
})

describe('ids a caller does not have', () => {
  it('HTTP: 404s for another caller’s ids and for made-up ones are counted per caller, kind, route and minute', async () => {
    const theirs = await apiB.secrets.create({ body: { name: 'B_ONLY', value: 'b-value' } })
    expect((await failure(apiA.secrets.get({ params: { id: theirs.id } }))).status).toBe(404)
    expect((await failure(apiA.secrets.delete({ params: { id: theirs.id } }))).status).toBe(404)
    // A fuzz of ids that exist for no one: still one entry, its count grows.
    for (let i = 0; i < 20; i++) await failure(apiA.secrets.get({ params: { id: `sec_madeup${i}` } }))
    await failure(apiA.tasks.get({ params: { id: 'task_madeup' } }))
    const denied = (await entries('access.denied')).filter((e) => e.actor.id === a.id)
    expect(denied.map((e) => [e.target.type, e.details?.where, e.details?.count]).sort()).toEqual([
      ['secret', 'secrets.delete', 1],
      ['secret', 'secrets.get', 21],
      ['task', 'tasks.get', 1],
    ])
    const secrets = denied.find((e) => e.details?.where === 'secrets.get')!
    expect(secrets).toMatchObject({
      outcome: 'failure',
      target: { id: theirs.id },
      details: { where: 'secrets.get' },
      request_id: expect.stringMatching(/^req_/),
    })
    // A sees what it sent, nothing of B; B's log holds nothing of A's attempts.
    const seenByA = JSON.stringify((await apiA.audit.list({ query: { action: 'access.denied' } })).entries)
    expect(seenByA).not.toContain(b.id)
    expect((await apiB.audit.list({ query: { action: 'access.denied' } })).total).toBe(0)
    expect(JSON.stringify((await apiB.audit.list({ query: { limit: 100 } })).entries)).not.toContain(a.id)
  })

  it('WebSocket: subscribing to, or deciding on, another caller’s task is counted as over HTTP', async () => {
    const theirs = await pendingApproval(b.id, 'wsdenied')
    const ws = await socketOf(s, a.token)
    ws.send({ type: 'subscribe', task_id: theirs.task_id })
    ws.send({ type: 'decide', task_id: theirs.task_id, request_id: theirs.request_id, decision: 'allow' })
    await vi.waitFor(() => expect(ws.received.filter((m) => m.code === 'NOT_FOUND')).toHaveLength(2), 15_000)
    ws.socket.close()
    const denied = (await entries('access.denied')).filter((e) => e.details?.where?.toString().startsWith('ws.'))
    expect(denied.map((e) => [e.actor.id, e.target, e.details?.where, e.details?.count]).sort()).toEqual([
      [a.id, { type: 'task', id: theirs.task_id }, 'ws.decide', 1],
      [a.id, { type: 'task', id: theirs.task_id }, 'ws.subscribe', 1],
    ])
    // The task is B's and still pending: nothing changed.
    const pending = await apiB.tasks.approvals.list({ params: { id: theirs.task_id } })
    expect(pending.approvals.map((p) => p.status)).toEqual(['pending'])
  })
})

describe('decisions that lost a race', () => {
  it('two approval decisions at once over HTTP: one recorded as decided, the other as a failure (409)', async () => {
    const { task_id, request_id } = await pendingApproval(a.id, 'race')
    const decide = (decision: 'allow' | 'deny') =>
      s.request(`/v1/tasks/${task_id}/approvals/${request_id}`, { method: 'POST', token: a.token, json: { decision } })
    const statuses = (await Promise.all([decide('allow'), decide('deny')])).map((r) => r.status).sort()
    expect(statuses).toEqual([200, 409])
    const decided = (await entries('approval.decided')).filter((e) => e.target.id === request_id)
    expect(decided.map((e) => e.outcome).sort()).toEqual(['failure', 'success'])
    const lost = decided.find((e) => e.outcome === 'failure')!
    expect(lost).toMatchObject({ actor: { type: 'user', id: a.id }, details: { task_id } })
    expect(lost.details?.error).toMatch(/already/)
    expect(lost.source).toMatch(/127\.0\.0\.1/)
  })

  it('a decision over the WebSocket after one over HTTP is recorded as a failure', async () => {
    const { task_id, request_id } = await pendingApproval(a.id, 'wslate')
    await apiA.tasks.approvals.decide({ params: { id: task_id, request_id }, body: { decision: 'deny' } })
    const ws = await socketOf(s, a.token)
    ws.send({ type: 'decide', task_id, request_id, decision: 'allow' })
    await vi.waitFor(() => expect(ws.received).toContainEqual(expect.objectContaining({ code: 'CONFLICT' })), 15_000)
    ws.socket.close()
    const decided = (await entries('approval.decided')).filter((e) => e.target.id === request_id)
    expect(decided.map((e) => [e.outcome, e.details?.decision])).toEqual([
      ['failure', 'allow'],
      ['success', 'deny'],
    ])
  })
})
