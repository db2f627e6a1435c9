/** Forking a session: a new workspace with a copy of another's files, conversation and transcript. */
import { ApiError, isEndedStatus, newId, type ForkWorkspace, type Workspace } from '@berth/contract'
import type { Store } from '../ports/store.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { TaskRecord } from '../tasks/task.js'
import type { CheckpointRecord, Checkpoints } from './checkpoints.js'
import {
  assertNoTask,
  assertSession,
  finishedTask,
  latestTaskId,
  noCheckpoint,
  type SessionTaskDeps,
} from './session-task.js'
import { fileTarget } from './workspace-file-target.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'
import type { WorkspaceRecord, WorkspacesService } from './workspaces.js'

/** What a fork reads and writes. */
export interface ForkDeps extends SessionTaskDeps {
  store: Store
  workspaces: WorkspacesService
  engine: TaskEngine | undefined
  snapshots: WorkspaceSnapshots
  checkpoints: Checkpoints
}

/** Transcript events copied per read. */
const PAGE = 500

const conversationKey = (owner: string, wsId: string) => `ws-conversations:${owner}:${wsId}`

/**
 * Fork a session's workspace: a new workspace and session for the same owner. At the
 * latest finished task (the default) it holds a copy of the files as they are now (taken
 * from the warm container while no task runs, from the volume, or from the kept files of a
 * released container), the SDK conversation inside them, and a copy of the transcript; at
 * an earlier task, that task's checkpoint (its files and conversation) and the transcript
 * up to and including it. The copy waits in the store as the new workspace's kept files
 * until its first task puts it into a container (see `SessionContainers.lease`). The
 * original is only read.
 *
 * An earlier task without a checkpoint is a 409 saying why it has none.
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
  const { at, checkpoint } = await forkPoint(d, owner, src, input.at_task_id)
  await assertNoTask(d, owner, src, 'fork')
  if (!src.profile_id)
    throw new ApiError('CONFLICT', `Workspace ${src.id}'s profile was deleted: a fork of it could not run a task`)
  const forkId = newId('workspace')
  const events = checkpoint ? checkpoint.seq : await d.eventLog.count(owner, src.id)
  const copied = checkpoint ? await fromCheckpoint(d, owner, src, at, forkId) : await copyFiles(d, owner, src, forkId)
  try {
    // A task that started while the files were read may have changed them half way.
    await assertNoTask(d, owner, src, 'fork')
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
      sdk_session_id: checkpoint ? checkpoint.sdk_session_id : src.sdk_session_id,
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

/** The task to fork at, and its checkpoint unless it is the latest (whose files are copied as they are now). */
async function forkPoint(
  d: ForkDeps,
  owner: string,
  src: WorkspaceRecord,
  atTaskId: string | undefined,
): Promise<{ at: TaskRecord; checkpoint: CheckpointRecord | null }> {
  const latestId = await latestTaskId(d, owner, src.id)
  const latest = await assertSession(d, owner, src, 'fork', latestId)
  if (atTaskId !== undefined) {
    const at = await finishedTask(d, owner, src, atTaskId, 'at_task_id', 'fork')
    if (at.id === latestId) return { at, checkpoint: null }
    const checkpoint = await d.checkpoints.find(owner, src.id, at.id)
    if (!checkpoint) throw noCheckpoint(at, 'fork')
    return { at, checkpoint }
  }
  if (!latest) throw new ApiError('CONFLICT', `Workspace ${src.id} has no finished task yet: there is nothing to fork`)
  if (!isEndedStatus(latest.status))
    throw new ApiError(
      'CONFLICT',
      `Task ${latest.id} is ${latest.status} in workspace ${src.id}: fork once it has finished`,
      { task_id: latest.id, status: latest.status },
    )
  return { at: latest, checkpoint: null }
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

/** A task's checkpoint as the fork's kept files (its conversation inside them). */
async function fromCheckpoint(
  d: ForkDeps,
  owner: string,
  src: WorkspaceRecord,
  at: TaskRecord,
  forkId: string,
): Promise<{ files: boolean }> {
  const tar = await d.checkpoints.files(owner, src.id, at.id)
  if (!tar) throw noCheckpoint(at, 'fork')
  if (!(await d.snapshots.put(owner, forkId, tar)))
    throw new ApiError('PAYLOAD_TOO_LARGE', `Task ${at.id}'s files are larger than your kept files may be`)
  return { files: true }
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
