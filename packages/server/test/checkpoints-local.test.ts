/**
 * Checkpoints of sessions on the `local` runtime (bubblewrap): a fork at task 2 of 3 and a
 * rewind to it (also of a persistent session), the refusals (409 while a task runs, 404
 * across callers, 400 for another workspace's task or a batch workspace), and checkpoints
 * kept across a restart (SQLite, the same data dir).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { forkAtSecond, rewindToSecond, textFiles } from './checkpoints.helpers.js'
import { clientFor, failure, startServer, waitForTask } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

/** A local server (room for the sessions every test leaves warm); with `data`, its records in SQLite there, as `pnpm start` keeps them. */
async function localServer(dirs: { base: string; data?: string }) {
  const runtime = localRuntime({ baseDir: dirs.base, logger: silentLogger, sandbox: 'bwrap' })
  const pool = uniquePoolName('local-ckpt')
  const s = await startServer({
    runtime,
    pool: { image: 'local', min: 0, max: 10, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    concurrency: 20,
    ...(dirs.data && { dataDir: dirs.data, storage: undefined }),
  })
  await s.berth.ready
  const close = async () => {
    await s.close()
    await Promise.all((await onEngine(runtime, pool)).map((c) => runtime.remove(c.id)))
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
  }
  return { s, close }
}

describe('checkpoints of a session on local (bwrap)', () => {
  const base = mkdtempSync(join(tmpdir(), 'berth-local-ckpt-'))
  let server: Awaited<ReturnType<typeof localServer>>
  let user: Awaited<ReturnType<typeof agentUser>>
  beforeAll(async () => {
    server = await localServer({ base })
    user = await agentUser(server.s, { waitMs: 90_000 })
  })
  afterAll(async () => {
    await server?.close()
    rmSync(base, { recursive: true, force: true })
  })

  it('a fork at task 2 of 3 has task 2’s files and memory, nothing of task 3; the original is untouched', async () => {
    await forkAtSecond(user)
  }, 300_000)

  it('a rewind to task 2 of 3 takes the session back: files, memory, later tasks marked; the owner sees it audited', async () => {
    const { workspace } = await rewindToSecond(user)
    await server.s.berth.services.audit.flush()
    const { entries } = await user.api.audit.list({ query: { action: 'workspace.rewound', limit: 100 } })
    // The rewind, and the refused one to task 3 (a 409 is recorded as a failure).
    const outcomes = entries.map((e) => [e.target.id, e.outcome]).sort()
    expect(outcomes).toEqual([
      [workspace, 'failure'],
      [workspace, 'success'],
    ])
  }, 300_000)

  it('a persistent session rewinds onto a volume made anew with task 2’s files', async () => {
    const profile = await user.api.profiles.create({
      body: { name: 'Kept', slug: 'kept', api_key_id: user.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    await rewindToSecond(user, profile.id)
  }, 300_000)

  it('refuses a rewind while a task runs (409), across callers (404), for another workspace or a batch one (400)', async () => {
    const first = await user.run({ mode: 'session', prompt: 'Start. [[berth:text ok]]' })
    const ws = first.workspace_id!
    const rewind = (id: string, to: string, api = user.api) =>
      failure(api.workspaces.rewind({ params: { id }, body: { to_task_id: to } }))
    const other = await agentUser(server.s)
    expect(await rewind(ws, first.task_id, other.api)).toMatchObject({ status: 404, code: 'NOT_FOUND' })
    const theirs = await other.run({ mode: 'session', prompt: 'Mine. [[berth:text ok]]' })
    expect(await rewind(ws, theirs.task_id)).toMatchObject({ status: 404, code: 'NOT_FOUND' })
    const mine = await user.run({ mode: 'session', prompt: 'Elsewhere. [[berth:text ok]]' })
    expect(await rewind(ws, mine.task_id)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })

    const slow = await user.submit({
      mode: 'session',
      session_id: first.session_id!,
      prompt: 'Take your time. [[berth:slow 50]] [[berth:text done slowly]]',
    })
    const busy = await rewind(ws, first.task_id)
    expect(busy).toMatchObject({ status: 409, code: 'CONFLICT', details: { task_id: slow.task_id } })
    expect(await rewind(ws, slow.task_id)).toMatchObject({ status: 409 })
    expect((await user.waitDone(slow.task_id)).status).toBe('completed')

    const batch = await user.run({ prompt: 'Once. [[berth:text ok]]' })
    const refused = await rewind(batch.workspace_id!, batch.task_id)
    expect(refused).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })
    expect(refused.message).toContain('batch')
    // Nothing of the session changed: its checkpoints are its two tasks'.
    const { checkpoints } = await user.api.workspaces.checkpoints({ params: { id: ws } })
    expect(checkpoints.map((c) => c.task_id)).toEqual([first.task_id, slow.task_id])
    expect(await failure(other.api.workspaces.checkpoints({ params: { id: ws } }))).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    })
  }, 180_000)

  it('checkpoints survive a restart: a new server on the same data dir forks at and rewinds to them', async () => {
    const data = mkdtempSync(join(tmpdir(), 'berth-local-ckpt-data-'))
    const first = await localServer({ base, data })
    const before = await agentUser(first.s, { waitMs: 90_000 })
    const t1 = await before.run({
      mode: 'session',
      prompt: 'Remember alpha. [[berth:tool Bash {"command":"echo alpha > a.txt"}]] [[berth:text noted]]',
    })
    const t2 = await before.run({
      mode: 'session',
      session_id: t1.session_id!,
      prompt: 'Remember beta. [[berth:tool Bash {"command":"echo beta > b.txt"}]] [[berth:text noted]]',
    })
    expect([t1.status, t2.status]).toEqual(['completed', 'completed'])
    const ws = t1.workspace_id!
    const listed = (await before.api.workspaces.checkpoints({ params: { id: ws } })).checkpoints
    await first.close()

    const second = await localServer({ base, data })
    try {
      const api = clientFor(second.s, before.token)
      expect((await api.workspaces.checkpoints({ params: { id: ws } })).checkpoints).toEqual(listed)
      const fork = await api.workspaces.fork({ params: { id: ws }, body: { at_task_id: t1.task_id } })
      expect(await textFiles(api, fork.id)).toEqual({ 'a.txt': 'alpha' })
      await api.workspaces.rewind({ params: { id: ws }, body: { to_task_id: t1.task_id } })
      expect(await textFiles(api, ws)).toEqual({ 'a.txt': 'alpha' })
      const prompt = 'Which prompts came before? [[berth:recall_all]]'
      const body = { mode: 'session' as const, profile_id: before.profileId, session_id: t1.session_id!, prompt }
      const next = await api.tasks.submit({ body })
      const recalled = await waitForTask(api, next.task_id, { timeout: 90_000 })
      expect(recalled.result?.text).toContain('The earlier prompts were: Remember alpha.')
      expect(recalled.result?.text).not.toContain('beta')
    } finally {
      await second.close()
      rmSync(data, { recursive: true, force: true })
    }
  }, 300_000)
})
