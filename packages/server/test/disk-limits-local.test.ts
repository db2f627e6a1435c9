/**
 * Disk limits through the whole task path on the `local` runtime (bubblewrap, a root
 * server): an environment's `disk_mb` is the size of the workspace the agent sees, a
 * persistent session's volume too, and a 2 GiB `fallocate` there or in `/tmp` is a tool
 * error the agent reads. The host's free space is checked by testkit's `diskLimitSuite`.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text checked]]`
// A failed fallocate on ext4 keeps what it allocated: the file goes, so the runner can go on writing.
const fill = (dir: string) => bash(`fallocate -l 2G ${dir}/big; e=$?; rm -f ${dir}/big; exit $e`)

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
      pool: { image: 'local', min: 0, max: 2, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    t = await agentUser(s, { waitMs: 90_000 })
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
    await s?.close()
    for (const c of await onEngine(runtime, pool)) await runtime.remove(c.id)
    for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    rmSync(baseDir, { recursive: true, force: true })
    rmSync(dir, { recursive: true, force: true })
  })

  const toolResults = async (taskId: string) =>
    (await t.events(taskId)).filter((e) => e.type === 'tool_result') as unknown as {
      is_error: boolean
      output: string
    }[]

  it("disk_mb is the workspace's size; 2 GiB in /workspace and /tmp are tool errors the agent sees", async () => {
    const done = await t.run({
      profile_id: profileId,
      prompt: [bash('df -k /workspace | tail -1'), fill('/workspace'), fill('/tmp')].join(' '),
    })
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
    const results = await toolResults(done.task_id)
    expect(results).toHaveLength(3)
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
})
