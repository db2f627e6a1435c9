import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TaskRecord } from '@berth/core'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, startServer, type TestServer } from './helpers.js'

/** A list's total, read from the raw JSON of a snapshot. */
const total = (list: unknown) => (list as { total: number }).total
const dataDir = mkdtempSync(join(tmpdir(), 'berth-migrate-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** Every list the API has, as a caller (and the operator) sees it, plus a few reads by id. */
async function snapshot(s: TestServer, token: string, ids: Record<string, string>): Promise<Record<string, unknown>> {
  const paths = [
    '/v1/api-keys',
    '/v1/profiles',
    '/v1/secrets',
    '/v1/tools',
    '/v1/skills',
    '/v1/agents',
    '/v1/memory',
    `/v1/memory?profile_id=${ids.profile}`,
    '/v1/memory?type=fact&limit=2&page=2',
    '/v1/integrations',
    `/v1/integrations/${ids.integration}/deliveries`,
    `/v1/profiles/${ids.profile}/playbooks`,
    `/v1/playbooks/${ids.playbook}/runs`,
    '/v1/tasks',
    '/v1/tasks?status=completed',
    '/v1/tasks?mode=batch&status=failed',
    '/v1/tasks?limit=3&page=2',
    '/v1/workspaces',
    '/v1/workspaces?status=idle',
    `/v1/tasks/${ids.task}`,
    `/v1/profiles/${ids.profile}`,
  ]
  const out: Record<string, unknown> = {}
  // A cursor is sealed afresh on every answer: compare the page it leads to, not its bytes.
  const read = async (p: string, follow: boolean): Promise<Record<string, unknown>> => {
    const res = await s.request(p, { token })
    expect(res.status, p).toBe(200)
    const body = (await res.json()) as Record<string, unknown>
    if (typeof body.next_cursor !== 'string') return body
    const url = new URL(p, 'http://berth.test')
    url.searchParams.delete('page')
    url.searchParams.set('cursor', body.next_cursor)
    const next = follow ? await read(`${url.pathname}${url.search}`, false) : true
    return { ...body, next_cursor: next }
  }
  for (const p of paths) out[p] = await read(p, true)
  out['/admin/users'] = await (await s.request('/admin/users', { token: ADMIN_TOKEN })).json()
  return out
}

it('a data dir in the fs layout is migrated once, in place, with progress, and nothing is lost', async () => {
  // Written the way earlier versions wrote it: unstorage's fs driver under <dataDir>/store.
  const legacy = await startServer({
    dataDir,
    storage: createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) }),
  })
  const { token } = await legacy.user('Ada')
  await legacy.user('Grace')
  const owner = (await legacy.berth.services.users.authenticate(token))!.id
  const api = clientFor(legacy, token)
  const key = await api.apiKeys.create({ body: { name: 'k', provider: 'anthropic', key: 'sk-migrate' } })
  const profile = await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id } })
  await api.profiles.create({ body: { name: 'Q', slug: 'q', api_key_id: key.id } })
  await api.secrets.create({ body: { name: 'A_SECRET', value: 'kept-secret' } })
  await api.tools.create({ body: { name: 'tool-a', server: { type: 'stdio', command: 'node', args: ['server.js'] } } })
  await api.skills.create({ body: { name: 'skill-a', body: '# Skill' } })
  await api.agents.create({ body: { name: 'agent-a', prompt: 'You review code.' } })
  for (let i = 0; i < 5; i++) {
    legacy.clock.advance(1000)
    await api.memory.create({
      body: {
        type: i % 2 ? 'fact' : 'preference',
        name: `M${i}`,
        body: `row ${i}`,
        profile_id: i < 2 ? profile.id : undefined,
      },
    })
  }
  const integration = await api.integrations.create({
    body: { type: 'email', config: { recipients: ['ops@example.com'] } },
  })
  await legacy.berth.services.deliveries.record(owner, {
    integration_id: integration.id,
    notification_id: 'ntf_0000000001',
    event: 'task.completed',
    attempt: 1,
    status: 'failed',
    response_status: null,
    error: 'no SMTP server',
    will_retry: false,
    duration_ms: 3,
    at: '2026-01-01T00:00:09.000Z',
  })
  const playbook = await api.playbooks.create({
    body: { profile_id: profile.id, name: 'Digest', prompt: 'Write the digest.' },
  })
  // No container runtime here: each run is recorded, then fails to start.
  for (let i = 0; i < 2; i++) await api.playbooks.run({ params: { id: playbook.id } })
  // Tasks and their workspaces, as the task service stores them.
  const statuses = ['completed', 'failed', 'completed', 'cancelled', 'failed', 'completed', 'completed'] as const
  let task = ''
  for (const [i, status] of statuses.entries()) {
    legacy.clock.advance(1000)
    const ws = await legacy.berth.services.workspaces.create(owner, {
      profile_id: profile.id,
      persistent: false,
      name: `W${i}`,
    })
    // A settled state: a restart's recovery would move `starting` and `running` ones on.
    await legacy.berth.services.workspaces.setStatus(owner, ws.id, 'idle')
    const now = new Date(legacy.clock.now()).toISOString()
    const record: TaskRecord = {
      id: `task_${String(i).padStart(9, '0')}legacy${i}x`,
      owner_id: owner,
      mode: i % 3 ? 'batch' : 'session',
      profile_id: profile.id,
      prompt: `task ${i}`,
      priority: 'normal',
      workspace_id: ws.id,
      session_id: ws.session_id,
      allowed_tools: null,
      max_turns: null,
      max_budget_usd: null,
      status,
      started_at: now,
      finished_at: now,
      result: null,
      error: null,
      created_at: now,
      updated_at: now,
    }
    await legacy.berth.services.tasks.records.put(record)
    task = record.id
  }
  const ids = { profile: profile.id, integration: integration.id, playbook: playbook.id, task }
  const before = await snapshot(legacy, token, ids)
  expect(total(before['/v1/tasks'])).toBe(7)
  expect(total(before['/v1/workspaces'])).toBe(7)
  expect(total(before[`/v1/playbooks/${playbook.id}/runs`])).toBe(2)
  await legacy.close()
  expect(existsSync(join(dataDir, 'store'))).toBe(true)
  expect(existsSync(join(dataDir, 'berth.db'))).toBe(false)

  // Today's default store on the same data dir: migrates, logging progress.
  const migrated = await startServer({ dataDir, storage: undefined })
  try {
    const lines = migrated.logs.map((l) => JSON.parse(l) as { msg: string }).filter((l) => l.msg.startsWith('storage:'))
    expect(lines[0]!.msg).toMatch(/^storage: migrating \d+ keys from the fs layout/)
    expect(lines.some((l) => /migrated (\d+)\/\1 keys \(100%\)/.test(l.msg))).toBe(true)
    expect(lines.at(-1)!.msg).toMatch(/migration done/)
    expect(existsSync(join(dataDir, 'store'))).toBe(false)
    expect(readdirSync(dataDir).filter((f) => f.startsWith('store.migrated-'))).toHaveLength(1)
    expect(existsSync(join(dataDir, 'berth.db'))).toBe(true)
    // Every list, filter and page reads the same; keys and encrypted values still work.
    expect(await snapshot(migrated, token, ids)).toEqual(before)
    expect(await migrated.berth.services.secrets.forTask(owner, profile.id)).toEqual([
      { name: 'A_SECRET', delivery: 'env', value: 'kept-secret' },
    ])
    expect((await migrated.berth.services.apiKeys.resolve(owner, key.id)).key).toBe('sk-migrate')
    // New records land in the migrated lists, newest first.
    migrated.clock.advance(60_000)
    const res = await migrated.request('/v1/memory', {
      method: 'POST',
      token,
      json: { type: 'fact', name: 'New', body: 'after' },
    })
    expect(res.status).toBe(201)
    const list = await clientFor(migrated, token).memory.list()
    expect(list.total).toBe(6)
    expect(list.memory[0]).toMatchObject({ name: 'New' })
  } finally {
    await migrated.close()
  }

  // Once: the next start finds nothing to migrate, and everything is still there.
  const again = await startServer({ dataDir, storage: undefined })
  try {
    expect(again.logs.filter((l) => l.includes('storage: migrat'))).toEqual([])
    const api = clientFor(again, token)
    expect((await api.memory.list()).total).toBe(6)
    expect((await api.tasks.list({ query: { status: 'completed' } })).total).toBe(4)
  } finally {
    await again.close()
  }
})
