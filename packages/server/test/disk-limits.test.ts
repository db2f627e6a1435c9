/**
 * Disk limits through the whole task path on Docker and Podman: an environment's `disk_mb`
 * is the size of the workspace the agent sees (a persistent session's volume too), a 2 GiB
 * `fallocate` in `/workspace`, `/tmp`, `$HOME` or `/var/tmp` is a tool error the agent reads
 * (the host's free space is checked by testkit's `diskLimitSuite`), and a disk so full that
 * the runner cannot go on fails the task with DISK_LIMIT_EXCEEDED.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { bash, diskTaskCases, smallDiskProfiles } from './disk-limits.helpers.js'

describe.each(['docker', 'podman'] as const)('disk limits through tasks: %s', (engine) => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))
  const { info } = engineRuntime(engine)
  const runtime = (engine === 'docker' ? dockerRuntime : podmanRuntime)({ socketPath: info.socketPath, disks: { dir } })
  const pool = uniquePoolName('disk')
  let t: Awaited<ReturnType<typeof taskServer>>
  let profileId: string
  let sessionProfileId: string

  beforeAll(async () => {
    t = await taskServer(engine, {
      berth: {
        runtime,
        pool: { image: info.image, min: 0, max: 4, name: pool, spec: { network: 'none' } },
      },
    })
    ;({ profileId, sessionProfileId } = await smallDiskProfiles(t))
  }, 120_000)
  afterAll(async () => {
    await t?.s.close()
    await sweep(runtime, pool)
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    rmSync(dir, { recursive: true, force: true })
  })

  diskTaskCases(() => ({ t, profileId, sessionProfileId, dir }), ['/workspace', '/tmp', '$HOME', '/var/tmp'])

  it('a disk so full the runner cannot record its events fails the task with DISK_LIMIT_EXCEEDED', async () => {
    const done = await t.run({
      profile_id: profileId,
      // The tool's output (20 kB) needs blocks the full disk no longer has.
      prompt: bash('dd if=/dev/zero of=/workspace/fill bs=4k 2>/dev/null; head -c 20000 /dev/zero | tr "\\0" x'),
    })
    expect(done.status).toBe('failed')
    expect(done.error).toMatchObject({ code: 'DISK_LIMIT_EXCEEDED' })
  }, 120_000)
})
