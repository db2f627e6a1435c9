/**
 * Disk limits through the whole task path on the `local` runtime (bubblewrap, a root
 * server): an environment's `disk_mb` is the size of the workspace the agent sees, a
 * persistent session's volume too, and a 2 GiB `fallocate` there or in `/tmp` is a tool
 * error the agent reads. The host's free space is checked by testkit's `diskLimitSuite`.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'
import { diskTaskCases, smallDiskProfiles } from './disk-limits.helpers.js'

describe('disk limits through tasks: local (bwrap)', () => {
  const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-disk-tasks-'))
  const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap', disks: { dir } })
  const pool = uniquePoolName('local-disk')
  let s: TestServer
  let t: Awaited<ReturnType<typeof agentUser>>
  let profileId: string
  let sessionProfileId: string

  beforeAll(async () => {
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 0, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    t = await agentUser(s, { waitMs: 90_000 })
    ;({ profileId, sessionProfileId } = await smallDiskProfiles(t))
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    for (const c of await onEngine(runtime, pool)) await runtime.remove(c.id)
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    rmSync(baseDir, { recursive: true, force: true })
    rmSync(dir, { recursive: true, force: true })
  })

  diskTaskCases(() => ({ t, profileId, sessionProfileId, dir }), ['/workspace', '/tmp'])
})
