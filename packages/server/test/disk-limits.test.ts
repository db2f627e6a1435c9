/**
 * Disk limits through the whole task path on Docker and Podman: an environment's `disk_mb`
 * is the size of the workspace the agent sees (a persistent session's volume too), a 2 GiB
 * `fallocate` in `/workspace`, `/tmp`, `$HOME` or `/var/tmp` is a tool error the agent reads
 * (the host's free space is checked by testkit's `diskLimitSuite`), and a disk so full that
 * the runner cannot go on fails the task with DISK_LIMIT_EXCEEDED.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text checked]]`
// A failed fallocate on ext4 keeps what it allocated: the file goes, so the runner can go on writing.
const fill = (dir: string) => bash(`fallocate -l 2G ${dir}/big; e=$?; rm -f ${dir}/big; exit $e`)

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
        pool: { image: info.image, min: 0, max: 2, name: pool, spec: { network: 'none' } },
      },
    })
    const env = await t.api.environments.create({
      body: { name: 'small', network: { policy: 'none' }, limits: { disk_mb: 64 } },
    })
    const body = { api_key_id: t.keyId, default_tools: ['Bash'], environment_id: env.id }
    profileId = (await t.api.profiles.create({ body: { ...body, name: 'Small', slug: 'small' } })).id
    sessionProfileId = (
      await t.api.profiles.create({ body: { ...body, name: 'Kept', slug: 'kept', persistent_sessions: true } })
    ).id
  }, 120_000)
  afterAll(async () => {
    await t?.s.close()
    await sweep(runtime, pool)
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    rmSync(dir, { recursive: true, force: true })
  })

  const toolResults = async (taskId: string) =>
    (await t.events(taskId)).filter((e) => e.type === 'tool_result') as unknown as {
      is_error: boolean
      output: string
    }[]

  it("disk_mb is the workspace's size; 2 GiB in /workspace, /tmp, $HOME and /var/tmp are tool errors the agent sees", async () => {
    const done = await t.run({
      profile_id: profileId,
      prompt: [bash('df -k /workspace | tail -1'), ...['/workspace', '/tmp', '$HOME', '/var/tmp'].map(fill)].join(' '),
    })
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
    const results = await toolResults(done.task_id)
    expect(results).toHaveLength(5)
    expect(Number(results[0]!.output.trim().split(/\s+/)[1])).toBeLessThanOrEqual(64 * 1024)
    for (const r of results.slice(1)) {
      expect(r.is_error).toBe(true)
      expect(r.output).toMatch(/no space left on device/i)
    }
  }, 120_000)

  it("a persistent session's volume is a disk of disk_mb", async () => {
    const done = await t.run({
      profile_id: sessionProfileId,
      mode: 'session',
      prompt: [bash('df -k /workspace | tail -1'), fill('/workspace')].join(' '),
    })
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
    const results = await toolResults(done.task_id)
    expect(Number(results[0]!.output.trim().split(/\s+/)[1])).toBeLessThanOrEqual(64 * 1024)
    expect(results[1]!.is_error).toBe(true)
    expect(results[1]!.output).toMatch(/no space left on device/i)
    expect(readdirSync(dir).some((f) => /^berth-ws-.*\.img$/.test(f))).toBe(true)
  }, 120_000)

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
