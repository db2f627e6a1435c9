/**
 * Forking a session on the `local` runtime (bubblewrap sandbox): from a warm workspace,
 * after the idle release and on a persistent (directory) volume.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'
import { forkAfterSecondTask, waitIdle } from './workspace-fork.helpers.js'

async function localServer(sessionIdleMs?: number) {
  const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-fork-'))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
  const pool = uniquePoolName('local-fork')
  const s = await startServer({
    runtime,
    pool: { image: 'local', min: 0, max: 4, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    ...(sessionIdleMs !== undefined && { sessionIdleMs }),
  })
  await s.berth.ready
  const user = await agentUser(s, { waitMs: 90_000 })
  const close = async () => {
    await s.close()
    await Promise.all((await onEngine(runtime, pool)).map((c) => runtime.remove(c.id)))
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    rmSync(baseDir, { recursive: true, force: true })
  }
  return { s, close, ...user }
}

describe('forking a session on local (bwrap)', () => {
  let warm: Awaited<ReturnType<typeof localServer>>
  let idle: Awaited<ReturnType<typeof localServer>>
  beforeAll(async () => {
    warm = await localServer()
    idle = await localServer(300)
  })
  afterAll(async () => {
    await warm?.close()
    await idle?.close()
  })

  it('a fork of a warm session has tasks 1–2’s files and memory, not task 3’s', async () => {
    const { fork } = await forkAfterSecondTask(warm)
    expect(fork.persistent).toBe(false)
  }, 300_000)

  it('a fork of a session released idle has its files and conversation', async () => {
    await forkAfterSecondTask(idle, { beforeFork: (ws) => waitIdle(idle.api, ws), originalKeepsFiles: false })
  }, 300_000)

  it('a fork of a persistent session gets a volume of its own', async () => {
    const profile = await warm.api.profiles.create({
      body: { name: 'Kept', slug: 'kept', api_key_id: warm.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const { fork } = await forkAfterSecondTask(warm, { profileId: profile.id })
    expect((await warm.api.workspaces.get({ params: { id: fork.id } })).persistent).toBe(true)
  }, 300_000)
})
