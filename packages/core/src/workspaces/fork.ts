/** Forking a session: a new workspace with a copy of another's files, conversation and transcript. */
import {
  ACTIVE_TASK_STATUSES,
  ApiError,
  isEndedStatus,
  newId,
  notFound,
  validationError,
  type ForkWorkspace,
  type Workspace,
} from '@berth/contract'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { TaskRecord } from '../tasks/task.js'
import type { EventLog } from './event-log.js'
import { fileTarget } from './workspace-file-target.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'
import type { WorkspaceRecord, WorkspacesService } from './workspaces.js'

/** What a fork reads and writes. */
export interface ForkDeps {
  store: Store
  workspaces: WorkspacesService
  tasks: { records: OwnedCollection<TaskRecord> }
  eventLog: EventLog
  engine: TaskEngine | undefined
  snapshots: WorkspaceSnapshots
}

/** Transcript events copied per read. */
const PAGE = 500

const conversationKey = (owner: string, wsId: string) => `ws-conversations:${owner}:${wsId}`

/**
 * Fork a session's workspace: a new workspace and session for the same owner, holding a
 * copy of the files as they are now (taken from the warm container while no task runs, from
 * the volume, or from the kept files of a released container), the SDK conversation inside
 * them, and a copy of the transcript. The copy waits in the store as the new workspace's
 * kept files until its first task puts it into a container (see `SessionContainers.lease`).
 * The original is only read.
 *
 * Files cannot be taken back to an earlier task, so `at_task_id` must be the latest
 * finished task of the workspace (the default); an earlier one is a 409 saying so.
 *
 * @example
 * ```ts
 * const fork = await forkWorkspace(deps, 'usr_1', 'ws_1', {})
 * fork.forked_from // { workspace_id: 'ws_1', task_id: 'task_2' }
 * ```
 */
export async function forkWorkspace(
  d: ForkDeps,
  owner: string,
  wsId: string,
  input: ForkWorkspace,
): Promise<Workspace> {
  const src = await d.workspaces.records.get(owner, wsId)
  const at = await forkPoint(d, owner, src, input.at_task_id)
  await assertNoTask(d, owner, src)
  if (!src.profile_id)
    throw new ApiError('CONFLICT', `Workspace ${src.id}'s profile was deleted: a fork of it could not run a task`)
  const forkId = newId('workspace')
  const events = await d.eventLog.count(owner, src.id)
  const copied = await copyFiles(d, owner, src, forkId)
  try {
    // A task that started while the files were read may have changed them half way.
    await assertNoTask(d, owner, src)
    const created = await d.workspaces.create(owner, {
      id: forkId,
      profile_id: src.profile_id,
      persistent: src.persistent,
      // Within the 200 characters a name may have, whole code points.
      name: `${[...src.name].slice(0, 193).join('')} (fork)`,
    })
    await copyTranscript(d, owner, src.id, forkId, events)
    const fork = await d.workspaces.patch(owner, created.id, {
      status: 'idle',
      tags: src.tags,
      model_override: src.model_override,
      sdk_session_id: src.sdk_session_id,
      seed_files: copied.files,
      forked_from: { workspace_id: src.id, task_id: at.id },
    })
    return d.workspaces.view(fork)
  } catch (err) {
    await d.snapshots.remove(owner, forkId)
    await d.store.remove(conversationKey(owner, forkId))
    if (await d.workspaces.records.find(owner, forkId)) await d.workspaces.removeRecord(owner, forkId)
    await d.eventLog.remove(owner, forkId)
    throw err
  }
}

/** The task to fork at: the owner's, of this session workspace, finished, and its latest. */
async function forkPoint(
  d: ForkDeps,
  owner: string,
  src: WorkspaceRecord,
  atTaskId: string | undefined,
): Promise<TaskRecord> {
  const latestId = await latestTaskId(d, owner, src.id)
  const latest = latestId ? await d.tasks.records.find(owner, latestId) : null
  if (latest?.mode === 'batch')
    throw validationError(
      [{ location: 'params', path: 'id', message: 'a batch task’s workspace has no session to fork' }],
      `Workspace ${src.id} belongs to a batch task: only a session can be forked`,
    )
  if (atTaskId !== undefined) {
    const at = await d.tasks.records.find(owner, atTaskId)
    if (!at) throw notFound('task', atTaskId)
    if (at.workspace_id !== src.id)
      throw validationError(
        [{ location: 'body', path: 'at_task_id', message: `task ${atTaskId} is not a task of workspace ${src.id}` }],
        `Task ${atTaskId} belongs to another workspace`,
      )
    if (!isEndedStatus(at.status))
      throw new ApiError('CONFLICT', `Task ${atTaskId} is ${at.status}: fork once it has finished`, {
        task_id: atTaskId,
        status: at.status,
      })
    if (at.id !== latestId)
      throw new ApiError(
        'CONFLICT',
        `A workspace can be forked only at its latest finished task (${latestId}): its files are copied as they are now and cannot be taken back to task ${atTaskId}`,
        { at_task_id: atTaskId, latest_task_id: latestId },
      )
    return at
  }
  if (!latest) throw new ApiError('CONFLICT', `Workspace ${src.id} has no finished task yet: there is nothing to fork`)
  if (!isEndedStatus(latest.status))
    throw new ApiError(
      'CONFLICT',
      `Task ${latest.id} is ${latest.status} in workspace ${src.id}: fork once it has finished`,
    )
  return latest
}

/** The task of the workspace's newest transcript event: the latest task that ran in it. */
async function latestTaskId(d: ForkDeps, owner: string, wsId: string): Promise<string | null> {
  const count = await d.eventLog.count(owner, wsId)
  if (count === 0) return null
  const [last] = await d.eventLog.read(owner, wsId, { after: count - 1, limit: 1 })
  return last?.task_id ?? null
}

/**
 * 409 while a task of the workspace is queued, starting or running (in the records every instance shares).
 *
 * @example
 * ```ts
 * await assertNoTask({ tasks }, 'usr_1', ws) // throws CONFLICT while a task of ws is under way
 * ```
 */
export async function assertNoTask(d: Pick<ForkDeps, 'tasks'>, owner: string, src: WorkspaceRecord): Promise<void> {
  for (const status of ACTIVE_TASK_STATUSES) {
    for (let page = 1; ; page++) {
      const { items, total } = await d.tasks.records.list(owner, { page, limit: 100 }, `status=${status}`)
      const busy = items.find((t) => t.workspace_id === src.id)
      if (busy)
        throw new ApiError(
          'CONFLICT',
          `Task ${busy.id} is ${status} in workspace ${src.id}: wait until it has finished (or cancel it)`,
          { task_id: busy.id, status },
        )
      if (page * 100 >= total) break
    }
  }
}

/**
 * Copy the files into the fork's kept files: from the warm container or the volume through
 * the runtime, else the released container's kept files and conversation from the store.
 */
async function copyFiles(
  d: ForkDeps,
  owner: string,
  src: WorkspaceRecord,
  forkId: string,
): Promise<{ files: boolean }> {
  const warm = d.engine && src.container_id && d.engine.pool.list().some((c) => c.id === src.container_id)
  // Its files are in a container this instance cannot reach: no older copy stands in for them.
  if (src.container_id && !warm && !src.volume)
    throw new ApiError(
      'CONFLICT',
      `Workspace ${src.id}'s container is held by another instance: fork it once it has idled out (or from that instance)`,
    )
  if (d.engine && (warm || src.volume)) {
    const target = await fileTarget(d, owner, src.id)
    try {
      if (!(await d.snapshots.save(d.engine.runtime, target.engineId, owner, forkId)))
        throw new ApiError('PAYLOAD_TOO_LARGE', `Workspace ${src.id}'s files are too large to fork`)
    } finally {
      await target.release()
    }
    return { files: true }
  }
  const files = await d.snapshots.copy(owner, src.id, forkId)
  const conversation = await d.store.get(conversationKey(owner, src.id))
  if (conversation) await d.store.set(conversationKey(owner, forkId), conversation)
  if (!files && !conversation)
    throw new ApiError(
      'CONFLICT',
      `Workspace ${src.id} has nothing left to fork: its container was released and its kept files and conversation are gone`,
    )
  return { files }
}

/** The first `count` events of the original, with their times, become the fork's transcript. */
async function copyTranscript(d: ForkDeps, owner: string, from: string, to: string, count: number): Promise<void> {
  for (let after = 0; after < count; ) {
    const events = await d.eventLog.read(owner, from, { after, limit: Math.min(PAGE, count - after) })
    if (events.length === 0) break
    await d.eventLog.append(owner, to, events, { keepAt: true })
    after = events[events.length - 1]!.seq
  }
  await d.eventLog.flush(owner, to)
}
