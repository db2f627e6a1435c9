/**
 * Disk limits through the whole task path on Docker: an environment's `disk_mb` is the size
 * of the workspace the agent sees, a 2 GiB `fallocate` in `/workspace` or `/tmp` is a tool
 * error the agent reads (the host's free space is checked by testkit's `diskLimitSuite`), and a disk so full that the
 * runner cannot go on fails the task with DISK_LIMIT_EXCEEDED.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))
const { info } = engineRuntime('docker')
let t: Awaited<ReturnType<typeof taskServer>>
let profileId: string

beforeAll(async () => {
  t = await taskServer('docker', {
    berth: {
      runtime: dockerRuntime({ socketPath: info.socketPath, disks: { dir } }),
      pool: { image: info.image, min: 0, max: 2, name: uniquePoolName('disk'), spec: { network: 'none' } },
    },
  })
  const env = await t.api.environments.create({
    body: { name: 'small', network: { policy: 'none' }, limits: { disk_mb: 64 } },
  })
  const profile = await t.api.profiles.create({
    body: { name: 'Small', slug: 'small', api_key_id: t.keyId, default_tools: ['Bash'], environment_id: env.id },
  })
  profileId = profile.id
}, 120_000)
afterAll(async () => {
  await t.s.close()
  await sweep(t.runtime, t.pool)
  rmSync(dir, { recursive: true, force: true })
})

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text checked]]`

it("disk_mb is the workspace's size; 2 GiB in /workspace and /tmp are tool errors the agent sees", async () => {
  const done = await t.run({
    profile_id: profileId,
    prompt: [
      bash('df -k /workspace | tail -1'),
      bash('fallocate -l 2G /workspace/big'),
      bash('fallocate -l 2G /tmp/big'),
    ].join(' '),
  })
  expect(done.status, JSON.stringify(done.error)).toBe('completed')
  const results = (await t.events(done.task_id)).filter((e) => e.type === 'tool_result') as unknown as {
    is_error: boolean
    output: string
  }[]
  expect(results).toHaveLength(3)
  expect(Number(results[0]!.output.trim().split(/\s+/)[1])).toBeLessThanOrEqual(64 * 1024)
  for (const r of results.slice(1)) {
    expect(r.is_error).toBe(true)
    expect(r.output).toMatch(/no space left on device/i)
  }
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
