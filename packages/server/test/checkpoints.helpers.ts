/** The checkpoint scenarios every runtime runs: three session tasks, then a fork at task 2 and a rewind to it. */
import type { BerthClient } from '@berth/client'
import { readTar } from '@berth/testkit'
import { expect } from 'vitest'
import { failure } from './helpers.js'
import type { agentUser } from './tasks.helpers.js'

type User = Awaited<ReturnType<typeof agentUser>>

/** A session prompt the agent remembers, whose Bash call runs `command`. */
const prompt = (word: string, command: string) =>
  `Remember ${word}. [[berth:tool Bash {"command":"${command}"}]] [[berth:text noted]]`

const RECALL = 'Which prompts came before? [[berth:recall_all]]'

/** The workspace's top-level text files, name → content. */
export async function textFiles(api: BerthClient, workspaceId: string): Promise<Record<string, string>> {
  const entries = await readTar(await api.files.download(workspaceId, ['.']))
  return Object.fromEntries(
    entries
      .map((e) => [e.name.replace(/^\.\//, ''), e.content.toString('utf8').trim()] as const)
      .filter(([name]) => /^[a-z]\.txt$/.test(name)),
  )
}

/**
 * Tasks 1–3 in a session: task 1 writes a.txt, task 2 b.txt, task 3 c.txt and changes a.txt.
 * Each is a checkpoint (listed oldest first, task 3's adding far less than the whole files).
 */
export async function threeTasks(user: User, profileId = user.profileId) {
  const run = async (body: { prompt: string; session_id?: string }) => {
    const t = await user.run({ mode: 'session', profile_id: profileId, ...body })
    expect(t.status, JSON.stringify(t.error)).toBe('completed')
    return t
  }
  const t1 = await run({ prompt: prompt('alpha', 'echo alpha > a.txt') })
  const session_id = t1.session_id!
  const t2 = await run({ session_id, prompt: prompt('beta', 'echo beta > b.txt') })
  const t3 = await run({ session_id, prompt: prompt('gamma', 'echo gamma > c.txt; echo changed > a.txt') })
  const workspace = t1.workspace_id!
  const { checkpoints } = await user.api.workspaces.checkpoints({ params: { id: workspace } })
  expect(checkpoints.map((c) => c.task_id)).toEqual([t1.task_id, t2.task_id, t3.task_id])
  // The conversation and the three small files: the first holds them all, a later one what changed.
  expect(checkpoints[2]!.files).toBeGreaterThan(2)
  expect(checkpoints[2]!.added_bytes).toBeLessThan(checkpoints[2]!.bytes)
  return { t1, t2, t3, workspace, session_id, run }
}

/** A follow-up that asks for every earlier prompt: its answer. */
async function recall(user: User, session_id: string, profileId: string): Promise<string> {
  const t = await user.run({ mode: 'session', profile_id: profileId, session_id, prompt: RECALL })
  expect(t.status, JSON.stringify(t.error)).toBe('completed')
  return t.result!.text
}

/**
 * Fork at task 2 of 3: the fork has task 1's a.txt and b.txt, no c.txt, a transcript up to
 * task 2, and its agent knows prompts 1–2 only; the original keeps task 3's files and memory.
 */
export async function forkAtSecond(user: User, profileId = user.profileId) {
  const { t2, t3, workspace, session_id } = await threeTasks(user, profileId)
  const fork = await user.api.workspaces.fork({ params: { id: workspace }, body: { at_task_id: t2.task_id } })
  expect(fork.forked_from).toEqual({ workspace_id: workspace, task_id: t2.task_id })
  expect(await textFiles(user.api, fork.id)).toEqual({ 'a.txt': 'alpha', 'b.txt': 'beta' })
  const copied = (await user.api.workspaces.transcript({ params: { id: fork.id }, query: { limit: 100 } })).events
  expect(copied.at(-1)).toMatchObject({ task_id: t2.task_id, type: 'result' })
  expect(copied.some((e) => e.task_id === t3.task_id)).toBe(false)

  const inFork = await recall(user, fork.session_id, profileId)
  expect(inFork).toContain('The earlier prompts were: Remember alpha. | Remember beta.')
  expect(inFork).not.toContain('gamma')
  expect(await textFiles(user.api, fork.id)).toEqual({ 'a.txt': 'alpha', 'b.txt': 'beta' })

  expect(await textFiles(user.api, workspace)).toEqual({ 'a.txt': 'changed', 'b.txt': 'beta', 'c.txt': 'gamma' })
  expect(await recall(user, session_id, profileId)).toContain('Remember alpha. | Remember beta. | Remember gamma.')
}

/**
 * Rewind to task 2 of 3: the session's files and conversation are task 2's, task 3 is marked
 * (its view and a `rewind` event), its checkpoint goes, and a follow-up builds on task 2.
 */
export async function rewindToSecond(user: User, profileId = user.profileId) {
  const { t1, t2, t3, workspace, session_id, run } = await threeTasks(user, profileId)
  const rewound = await user.api.workspaces.rewind({ params: { id: workspace }, body: { to_task_id: t2.task_id } })
  expect(rewound).toMatchObject({ id: workspace, status: 'idle', session_id })
  expect(await textFiles(user.api, workspace)).toEqual({ 'a.txt': 'alpha', 'b.txt': 'beta' })
  expect((await user.api.tasks.get({ params: { id: t3.task_id } })).rewound_at).toEqual(expect.any(String))
  expect((await user.api.tasks.get({ params: { id: t2.task_id } })).rewound_at).toBeNull()
  const { events } = await user.api.workspaces.transcript({ params: { id: workspace }, query: { limit: 100 } })
  expect(events.at(-1)).toMatchObject({ type: 'rewind', task_id: t2.task_id, rewound_task_ids: [t3.task_id] })
  // Task 3's own events are all still there.
  expect(events.filter((e) => e.task_id === t3.task_id).at(-1)).toMatchObject({ type: 'result' })
  expect(
    (await user.api.tasks.events({ params: { id: t2.task_id }, query: { limit: 100 } })).events.at(-1),
  ).toMatchObject({ type: 'result' })
  const { checkpoints } = await user.api.workspaces.checkpoints({ params: { id: workspace } })
  expect(checkpoints.map((c) => c.task_id)).toEqual([t1.task_id, t2.task_id])
  // Task 3 can be neither forked at nor rewound to any more, and the 409 says why.
  const gone = await failure(user.api.workspaces.fork({ params: { id: workspace }, body: { at_task_id: t3.task_id } }))
  expect(gone).toMatchObject({ status: 409, code: 'CONFLICT' })
  expect(gone.message).toContain('rewound')
  const back = await failure(
    user.api.workspaces.rewind({ params: { id: workspace }, body: { to_task_id: t3.task_id } }),
  )
  expect(back).toMatchObject({ status: 409, code: 'CONFLICT', details: { task_id: t3.task_id } })

  const t4 = await run({ session_id, prompt: prompt('delta', 'echo delta > d.txt') })
  expect(t4.workspace_id).toBe(workspace)
  const memory = await recall(user, session_id, profileId)
  expect(memory).toContain('The earlier prompts were: Remember alpha. | Remember beta. | Remember delta.')
  expect(memory).not.toContain('gamma')
  expect(await textFiles(user.api, workspace)).toEqual({ 'a.txt': 'alpha', 'b.txt': 'beta', 'd.txt': 'delta' })
  const after = await user.api.workspaces.checkpoints({ params: { id: workspace } })
  expect(after.checkpoints.map((c) => c.task_id).slice(0, 3)).toEqual([t1.task_id, t2.task_id, t4.task_id])
  return { t1, t2, t3, workspace, session_id }
}
