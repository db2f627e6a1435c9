/**
 * The audit log with real tasks on the `local` runtime (bubblewrap, the cheapest real one):
 * an approval allowed with a replaced input shows the input that ran in the approval, the
 * `permission_decision` event, `result.tool_calls` and the audit entry; preview links
 * created and revoked; two cancels at once (one wins); an agent's refused egress counted
 * per task, host and reason, bounded however many hosts it tries.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import type { AuditEntry } from '@berth/contract'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ADMIN_TOKEN, clientFor, startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { pendingOnce } from './steering.helpers.js'
import { agentUser } from './tasks.helpers.js'

type Agent = Awaited<ReturnType<typeof agentUser>>

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`
const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-audit-'))
const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
const pool = uniquePoolName('local-audit')
let s: TestServer
let a: Agent

/** The deployment's entries of `action`, after the counted ones are written. */
async function entries(action: AuditEntry['action']): Promise<AuditEntry[]> {
  await s.berth.services.audit.flush()
  return (await clientFor(s, ADMIN_TOKEN).admin.audit.list({ query: { action, limit: 100 } })).entries
}

beforeAll(async () => {
  s = await startServer({
    runtime,
    pool: { image: 'local', min: 1, max: 4, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    sessionIdleMs: 600_000,
  })
  await s.berth.ready
  a = await agentUser(s, { waitMs: 90_000 })
}, 120_000)

afterAll(async () => {
  await s?.close()
  const left = await onEngine(runtime, pool)
  await Promise.all(left.map((c) => runtime.remove(c.id)))
  rmSync(baseDir, { recursive: true, force: true })
})

describe('audit on local (bwrap)', () => {
  it('an approval allowed with a replaced input: the approval, the event, the result and the audit entry show what ran', async () => {
    const asked = { command: 'echo asked-for' }
    const ran = { command: 'echo ran-instead' }
    const { task_id } = await a.submit({
      prompt: `Echo. ${bash(asked.command)} [[berth:text Done.]]`,
      require_approval: ['Bash'],
    })
    const [request] = await pendingOnce(a, task_id)
    expect(request!.input).toEqual(asked)
    const decided = await a.api.tasks.approvals.decide({
      params: { id: task_id, request_id: request!.request_id },
      body: { decision: 'allow', input: ran },
    })
    expect(decided).toMatchObject({ status: 'allowed', input: ran, original_input: asked })
    const task = await a.waitDone(task_id)
    expect(task.status).toBe('completed')
    const events = await a.events(task_id)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ output: 'ran-instead' })
    expect(events.find((e) => e.type === 'permission_decision')).toMatchObject({
      decision: 'allow',
      input: ran,
      original_input: asked,
    })
    expect(task.result!.tool_calls).toEqual([
      expect.objectContaining({ name: 'Bash', input: ran, original_input: asked }),
    ])
    const entry = (await entries('approval.decided')).find((e) => e.target.id === request!.request_id)
    expect(entry).toMatchObject({
      actor: { type: 'user', id: a.id },
      details: { decision: 'allow', input: JSON.stringify(ran), original_input: JSON.stringify(asked) },
    })
  })

  it('records preview links created and revoked, two cancels at once as one success and one failure, the workspace deleted', async () => {
    const sub = await a.submit({ mode: 'session', prompt: `Wait. ${bash('sleep 60')} [[berth:text Never.]]` })
    const wsId = sub.workspace_id
    await vi.waitFor(
      async () => expect((await a.api.tasks.get({ params: { id: sub.task_id } })).status).toBe('running'),
      { timeout: 60_000, interval: 250 },
    )
    const p = await a.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } })
    await a.api.workspaces.previews.revoke({ params: { id: wsId, preview_id: p.id } })
    const cancel = () => s.request(`/v1/tasks/${sub.task_id}/cancel`, { method: 'POST', token: a.token })
    expect((await Promise.all([cancel(), cancel()])).map((r) => r.status)).toEqual([200, 200])
    expect((await a.waitDone(sub.task_id)).status).toBe('cancelled')
    expect((await cancel()).status).toBe(200)

    const created = (await entries('preview.created')).find((e) => e.target.id === p.id)
    expect(created).toMatchObject({
      actor: { type: 'user', id: a.id },
      outcome: 'success',
      details: { workspace_id: wsId, port: 8000, expires_at: p.expires_at },
    })
    // The link's token is in the create answer only.
    expect(JSON.stringify(created)).not.toContain(new URL(p.url).pathname.split('/')[2])
    expect((await entries('preview.revoked')).find((e) => e.target.id === p.id)).toMatchObject({
      actor: { id: a.id },
      details: { workspace_id: wsId },
    })
    const cancels = (await entries('task.cancelled')).filter((e) => e.target.id === sub.task_id)
    expect(cancels.map((e) => [e.outcome, e.details?.error ?? null]).sort()).toEqual([
      ['failure', 'another cancel or interrupt came first'],
      ['failure', 'the task had ended (cancelled)'],
      ['success', null],
    ])
    await a.api.workspaces.delete({ params: { id: wsId } })
    expect((await entries('workspace.deleted')).map((e) => e.target.id)).toContain(wsId)
  }, 120_000)

  it("an agent's refused egress: one entry per task, host and reason with a count, at most 20 hosts a minute", async () => {
    const env = await a.api.environments.create({
      body: { name: 'narrow', network: { policy: 'allowlist', allow: [{ host: 'allowed.test' }] } },
    })
    const profile = await a.api.profiles.create({
      body: { name: 'Narrow', slug: 'narrow', api_key_id: a.keyId, default_tools: ['Bash'], environment_id: env.id },
    })
    // 30 requests to one refused host, then one to each of 30 others, through the proxy the runner set up.
    const script = `const u = new URL(process.env.HTTP_PROXY)
      const auth = 'Basic ' + Buffer.from(decodeURIComponent(u.username) + ':' + decodeURIComponent(u.password)).toString('base64')
      const hosts = [...Array(30).fill('denied.test'), ...Array.from({ length: 30 }, (_, i) => 'spray' + i + '.test')]
      const get = (h) => new Promise((r) => require('http').request({ host: u.hostname, port: u.port, path: 'http://' + h + '/',
        headers: { host: h, 'proxy-authorization': auth } }, (res) => { res.resume(); r(res.statusCode) }).on('error', (e) => r(e.code)).end())
      ;(async () => { const codes = {}; for (const h of hosts) { const c = await get(h); codes[c] = (codes[c] || 0) + 1 } console.log('codes ' + JSON.stringify(codes)) })()`
    const command = `node -e "eval(Buffer.from('${Buffer.from(script).toString('base64')}', 'base64').toString())"`
    const task = await a.run({ profile_id: profile.id, prompt: `Reach out. ${bash(command)} [[berth:text Done.]]` })
    expect(task.status).toBe('completed')
    const output = (await a.events(task.task_id)).find((e) => e.type === 'tool_result')
    expect(output?.output).toContain('codes {"403":60}')

    const refused = (await entries('egress.refused')).filter((e) => e.details?.task_id === task.task_id)
    expect(refused).toHaveLength(21)
    const count = (host: string) => refused.find((e) => e.target.id === host)?.details?.count
    expect(count('denied.test')).toBe(30)
    expect(count('*')).toBe(11)
    expect(refused.reduce((sum, e) => sum + Number(e.details?.count), 0)).toBe(60)
    expect(refused.find((e) => e.target.id === 'denied.test')).toMatchObject({
      actor: { type: 'system', id: null },
      outcome: 'failure',
      details: { reason: 'not_allowlisted', status: 403, port: 80 },
    })
    // The task's owner sees them in its own log.
    const own = await a.api.audit.list({ query: { action: 'egress.refused', limit: 100 } })
    expect(own.entries.filter((e) => e.details?.task_id === task.task_id)).toHaveLength(21)
  }, 120_000)
})
