/**
 * Workspace volumes (persistent sessions) on a real engine: labelled like containers, so a
 * restart accounts for them and removes those whose workspace is gone.
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import { afterAll, describe, expect, it } from 'vitest'
import { atomicFsDriver } from '../src/fs-storage.js'
import { clientFor, startServer, type TestServer } from './helpers.js'
import { engineRuntime, sweep, tempDataDir, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

const { info, runtime } = engineRuntime('docker')
const pool = uniquePoolName('volumes')
const dataDir = tempDataDir()
// On disk, so the restart finds what the first run stored (close() disposes the storage).
const start = () =>
  startServer({
    storage: createStorage({ driver: atomicFsDriver({ base: join(dataDir, 'store') }) }),
    dataDir,
    runtime,
    pool: { image: info.image, min: 0, max: 4, name: pool, spec: { network: 'none' } },
    runner: { bundleDir: RUNNER_BUNDLE },
  })
const poolVolumes = () => runtime.listVolumes({ labels: { 'berth.pool': pool } })

afterAll(async () => {
  await sweep(runtime, pool)
  for (const v of await poolVolumes()) await runtime.removeVolume(v.name)
  rmSync(dataDir, { recursive: true, force: true })
  await runtime.close?.()
})

describe('workspace volumes (docker)', () => {
  let s: TestServer | undefined

  afterAll(async () => {
    await s?.close()
  })

  it('carry the pool, owner and workspace labels; a restart removes those whose workspace is gone and keeps the rest; deleting the workspace removes its own', async () => {
    s = await start()
    await s.berth.ready
    const user = await agentUser(s)
    const profile = await user.api.profiles.create({
      body: { name: 'P', slug: 'p', api_key_id: user.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const task = await user.run({
      mode: 'session',
      profile_id: profile.id,
      prompt: 'Keep a file [[berth:tool Bash {"command":"echo kept > a.txt"}]] [[berth:text ok]]',
    })
    expect(task.status).toBe('completed')
    const workspaceId = task.workspace_id!
    const ws = await user.api.workspaces.get({ params: { id: workspaceId } })
    expect(ws.status).toBe('running')

    const live = `berth-${workspaceId.replace('_', '-')}`
    expect(await poolVolumes()).toEqual([
      {
        name: live,
        labels: expect.objectContaining({
          'berth.managed': 'true',
          'berth.pool': pool,
          'berth.owner': user.id,
          'berth.workspace': workspaceId,
        }),
      },
    ])
    // What a workspace deleted while the engine was away leaves behind.
    const stale = `berth-ws-stale${pool.replace(/[^a-z0-9]/g, '')}`
    await runtime.createVolume(stale, {
      labels: { 'berth.pool': pool, 'berth.owner': user.id, 'berth.workspace': 'ws_zzzzzzzzzzzzzzzzzzzz' },
    })

    // A restart (containers kept): the live session's volume stays, the stale one goes.
    s.server.closeAllConnections()
    await s.berth.close()
    await new Promise<void>((r) => s!.server.close(() => r()))
    s = await start()
    await s.berth.ready
    expect((await poolVolumes()).map((v) => v.name)).toEqual([live])

    // Its files are still there, and deleting the workspace removes the volume.
    const api = clientFor(s, user.token)
    const files = await api.files.list(workspaceId, '.')
    expect(files.entries.map((e) => e.name)).toContain('a.txt')
    await api.workspaces.delete({ params: { id: workspaceId } })
    expect(await poolVolumes()).toEqual([])
  })
})
