/** What the task-path disk-limit tests share on every runtime: the prompts, the profiles, and the cases. */
import { readdirSync } from 'node:fs'
import { readTar } from '@berth/testkit'
import { expect, it } from 'vitest'
import type { agentUser } from './tasks.helpers.js'

type Agent = Awaited<ReturnType<typeof agentUser>>

/** A stub prompt that runs `command` with the Bash tool. */
export const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text checked]]`
// A failed fallocate on ext4 keeps what it allocated: the file goes, so the runner can go on writing.
const fill = (dir: string) => bash(`fallocate -l 2G ${dir}/big; e=$?; rm -f ${dir}/big; exit $e`)

/** An environment of 64 MiB workspaces and two Bash profiles on it: batch, and persistent sessions. */
export async function smallDiskProfiles(t: Agent): Promise<{ profileId: string; sessionProfileId: string }> {
  const env = await t.api.environments.create({
    body: { name: 'small', network: { policy: 'none' }, limits: { disk_mb: 64 } },
  })
  const body = { api_key_id: t.keyId, default_tools: ['Bash'], environment_id: env.id }
  const profileId = (await t.api.profiles.create({ body: { ...body, name: 'Small', slug: 'small' } })).id
  const sessionProfileId = (
    await t.api.profiles.create({ body: { ...body, name: 'Kept', slug: 'kept', persistent_sessions: true } })
  ).id
  return { profileId, sessionProfileId }
}

/**
 * The cases every runtime with disks passes through tasks: `disk_mb` is the workspace's
 * size and 2 GiB in each of `paths` is a tool error the agent sees; a persistent session's
 * volume is a disk of `disk_mb` (its image in `dir`).
 */
export function diskTaskCases(
  get: () => { t: Agent; profileId: string; sessionProfileId: string; dir: string },
  paths: string[],
): void {
  const toolResults = async (taskId: string) =>
    (await get().t.events(taskId)).filter((e) => e.type === 'tool_result') as unknown as {
      is_error: boolean
      output: string
    }[]

  it(`disk_mb is the workspace's size; 2 GiB in ${paths.join(', ')} are tool errors the agent sees`, async () => {
    const { t, profileId } = get()
    const done = await t.run({
      profile_id: profileId,
      prompt: [bash('df -k /workspace | tail -1'), ...paths.map(fill)].join(' '),
    })
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
    const results = await toolResults(done.task_id)
    expect(results).toHaveLength(paths.length + 1)
    expect(Number(results[0]!.output.trim().split(/\s+/)[1])).toBeLessThanOrEqual(64 * 1024)
    for (const r of results.slice(1)) {
      expect(r.is_error).toBe(true)
      expect(r.output).toMatch(/no space left on device/i)
    }
  }, 120_000)

  it("a persistent session's volume is a disk of disk_mb", async () => {
    const { t, sessionProfileId, dir } = get()
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

  // The disk's filesystem keeps its own entries (ext4's root-owned lost+found) out of
  // /workspace: a fork, a whole-workspace download and an upload all read or write every
  // entry there as the agent's user.
  it.each([
    ['a container disk', false],
    ["a persistent session's volume disk", true],
  ])(
    'on %s, /workspace holds only the agent files: fork, whole download and upload work',
    async (_, kept) => {
      const { t, profileId, sessionProfileId } = get()
      const profile_id = kept ? sessionProfileId : profileId
      const first = await t.run({ mode: 'session', profile_id, prompt: bash('echo kept > note.txt; ls -A /workspace') })
      expect(first.status, JSON.stringify(first.error)).toBe('completed')
      const seen = (await toolResults(first.task_id))[0]!.output
      expect(seen).toContain('note.txt')
      expect(seen).not.toContain('lost+found')
      const wsId = first.workspace_id!
      const names = async (id: string) => (await t.api.files.list(id)).entries.map((e) => e.name)
      expect(await names(wsId)).not.toContain('lost+found')
      const tar = await readTar(await t.api.files.download(wsId, ['/workspace']))
      expect(tar.map((e) => e.name)).toEqual(expect.arrayContaining([expect.stringMatching(/(^|\/)note\.txt$/)]))
      expect(tar.filter((e) => e.name.includes('lost+found'))).toEqual([])
      await t.api.files.upload(wsId, { name: 'up.txt', data: new TextEncoder().encode('uploaded') })

      const fork = await t.api.workspaces.fork({ params: { id: wsId }, body: {} })
      expect(await names(fork.id)).toEqual(expect.arrayContaining(['note.txt', 'up.txt']))
      const next = await t.run({
        mode: 'session',
        profile_id,
        session_id: fork.session_id,
        prompt: bash('cat note.txt up.txt'),
      })
      expect(next.status, JSON.stringify(next.error)).toBe('completed')
      expect((await toolResults(next.task_id))[0]!.output).toContain('kept\nuploaded')
      expect(await names(fork.id)).not.toContain('lost+found')
      // Their containers go back to the pool (the suites' pools are small).
      for (const id of [wsId, fork.id]) await t.api.workspaces.delete({ params: { id } })
    },
    180_000,
  )
}
