/** The fork scenario every runtime runs: three session tasks, a fork after the second, both sides followed up. */
import type { BerthClient } from '@berth/client'
import { expect, vi } from 'vitest'
import type { agentUser } from './tasks.helpers.js'

type User = Awaited<ReturnType<typeof agentUser>>

/** A session prompt that remembers `word` and writes `<file>.txt`. */
const step = (word: string, file: string) =>
  `Remember ${word}. [[berth:tool Bash {"command":"echo ${word} > ${file}.txt"}]] [[berth:text noted]]`

const RECALL = 'Which prompts came before? [[berth:recall_all]]'

/** The names in the workspace's root directory. */
export async function fileNames(api: BerthClient, workspaceId: string): Promise<string[]> {
  return (await api.files.list(workspaceId, '.')).entries.map((e) => e.name)
}

/** Wait until the idle timer released the workspace's container. */
export async function waitIdle(api: BerthClient, workspaceId: string): Promise<void> {
  await vi.waitFor(
    async () => expect((await api.workspaces.get({ params: { id: workspaceId } })).status).toBe('idle'),
    { timeout: 30_000, interval: 200 },
  )
}

/**
 * Tasks 1 and 2 in a session, then `beforeFork` (release it, say), a fork, task 3 in the
 * original: the fork's follow-up knows tasks 1–2 (files and conversation) and nothing of
 * task 3; the original still has task 3's file and memory and nothing of the fork's.
 * Returns both workspaces and the second task, for further checks.
 */
export async function forkAfterSecondTask(
  user: User,
  opts: {
    profileId?: string
    beforeFork?: (workspaceId: string) => Promise<void>
    /** False where each of the original's prompts gets a fresh container (released between prompts, no volume): only its conversation comes back. */
    originalKeepsFiles?: boolean
  } = {},
) {
  const profile_id = opts.profileId ?? user.profileId
  const t1 = await user.run({ mode: 'session', profile_id, prompt: step('alpha', 'one') })
  expect(t1.status, JSON.stringify(t1.error)).toBe('completed')
  const session_id = t1.session_id!
  const t2 = await user.run({ mode: 'session', profile_id, session_id, prompt: step('beta', 'two') })
  expect(t2.status, JSON.stringify(t2.error)).toBe('completed')
  const original = t1.workspace_id!
  await opts.beforeFork?.(original)

  const fork = await user.api.workspaces.fork({ params: { id: original }, body: {} })
  expect(fork).toMatchObject({
    status: 'idle',
    profile_id,
    forked_from: { workspace_id: original, task_id: t2.task_id },
  })
  expect(fork.id).not.toBe(original)
  expect(fork.session_id).not.toBe(session_id)
  // Readable before the fork has run anything: the copy waits as its kept files.
  expect(await fileNames(user.api, fork.id)).toEqual(expect.arrayContaining(['one.txt', 'two.txt']))
  // Its transcript starts with the original's events, up to task 2.
  const copied = (await user.api.workspaces.transcript({ params: { id: fork.id }, query: { limit: 100 } })).events
  const [originalFirst] = (await user.api.workspaces.transcript({ params: { id: original }, query: { limit: 1 } }))
    .events
  expect(copied[0]).toEqual(originalFirst)
  expect(copied.at(-1)).toMatchObject({ task_id: t2.task_id })

  const t3 = await user.run({ mode: 'session', profile_id, session_id, prompt: step('gamma', 'three') })
  expect(t3.status, JSON.stringify(t3.error)).toBe('completed')

  const inFork = await user.run({ mode: 'session', profile_id, session_id: fork.session_id, prompt: RECALL })
  expect(inFork.status, JSON.stringify(inFork.error)).toBe('completed')
  expect(inFork.workspace_id).toBe(fork.id)
  expect(inFork.result!.text).toContain('The earlier prompts were: Remember alpha. | Remember beta.')
  expect(inFork.result!.text).not.toContain('gamma')
  const forkFiles = await fileNames(user.api, fork.id)
  expect(forkFiles).toEqual(expect.arrayContaining(['one.txt', 'two.txt']))
  expect(forkFiles).not.toContain('three.txt')
  const more = await user.run({
    mode: 'session',
    profile_id,
    session_id: fork.session_id,
    prompt: step('delta', 'four'),
  })
  expect(more.status, JSON.stringify(more.error)).toBe('completed')

  const inOriginal = await user.run({ mode: 'session', profile_id, session_id, prompt: RECALL })
  expect(inOriginal.result!.text).toContain('Remember alpha. | Remember beta. | Remember gamma.')
  expect(inOriginal.result!.text).not.toContain('delta')
  const originalFiles = await fileNames(user.api, original)
  if (opts.originalKeepsFiles !== false)
    expect(originalFiles).toEqual(expect.arrayContaining(['one.txt', 'two.txt', 'three.txt']))
  expect(originalFiles).not.toContain('four.txt')
  const view = await user.api.workspaces.get({ params: { id: original } })
  expect(view.forked_from).toBeNull()
  return { original, fork, t2, latest: inOriginal, session_id }
}
