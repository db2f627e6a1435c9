/** Rewinding a session: its files, conversation and checkpoints taken back to one of its finished tasks. */
import { ApiError, type RewindWorkspace, type Workspace } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { TaskRecord } from '../tasks/task.js'
import type { Checkpoints } from './checkpoints.js'
import {
  assertNoTask,
  assertSession,
  finishedTask,
  latestTaskId,
  noCheckpoint,
  type SessionTaskDeps,
} from './session-task.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'
import type { WorkspacesService } from './workspaces.js'

/** What a rewind reads and writes. */
export interface RewindDeps extends SessionTaskDeps {
  store: Store
  clock: Clock
  workspaces: WorkspacesService
  /** Releases the session's warm container (its agent with it). */
  tasks: SessionTaskDeps['tasks'] & { containers: { release(owner: string, wsId: string): Promise<void> } }
  engine: TaskEngine | undefined
  snapshots: WorkspaceSnapshots
  checkpoints: Checkpoints
}

/** Transcript events read per page, looking for the tasks after the checkpoint. */
const PAGE = 500

/**
 * Take a session back to task `to_task_id`: its warm container released, its files (on a
 * fresh volume, for a persistent session) and conversation id the checkpoint's, planted in
 * its next container by `SessionContainers.lease` as a fork's are, the checkpoints of later
 * tasks dropped. The transcript keeps every event: later tasks get `rewound_at` and a
 * `rewind` event is appended.
 *
 * Only the records every instance shares are read: a container another instance holds
 * is a 409 (as for a fork), not reached over the network.
 *
 * @example
 * ```ts
 * const ws = await rewindWorkspace(deps, 'usr_1', 'ws_1', { to_task_id: 'task_2' })
 * ```
 */
export async function rewindWorkspace(
  d: RewindDeps,
  owner: string,
  wsId: string,
  input: RewindWorkspace,
): Promise<Workspace> {
  const ws = await d.workspaces.records.get(owner, wsId)
  await assertSession(d, owner, ws, 'rewind', await latestTaskId(d, owner, ws.id))
  const to = await finishedTask(d, owner, ws, input.to_task_id, 'to_task_id', 'rewind')
  const checkpoint = await d.checkpoints.find(owner, ws.id, to.id)
  if (!checkpoint) throw noCheckpoint(to, 'rewind')
  await assertNoTask(d, owner, ws, 'rewind')
  const warm = ws.container_id && d.engine?.pool.list().some((c) => c.id === ws.container_id)
  if (ws.container_id && !warm)
    throw new ApiError(
      'CONFLICT',
      `Workspace ${ws.id}'s container is held by another instance: rewind it once it has idled out (or from that instance)`,
    )
  if (ws.volume && !d.engine)
    throw new ApiError('CONFLICT', `Workspace ${ws.id}'s files are on a volume and this server runs no containers`)
  // Read whole before anything changes: a checkpoint that cannot be read leaves the session as it was.
  const files = await d.checkpoints.files(owner, ws.id, to.id)
  if (!files) throw noCheckpoint(to, 'rewind')
  if (!d.snapshots.fits(files.byteLength))
    throw new ApiError('PAYLOAD_TOO_LARGE', `Task ${to.id}'s files are larger than your kept files may be`)
  if (warm) await d.tasks.containers.release(owner, ws.id)
  // A follow-up submitted meanwhile would run on files about to change.
  await assertNoTask(d, owner, ws, 'rewind')
  if (!(await d.snapshots.put(owner, ws.id, files)))
    throw new ApiError('PAYLOAD_TOO_LARGE', `Task ${to.id}'s files are larger than your kept files may be`)
  // The next claim makes the volume anew (same name, labels and size) and plants the files in it.
  if (ws.volume) await d.engine!.runtime.removeVolume(ws.volume)
  // The conversation is in the planted files: no kept one is put back over it.
  await d.store.remove(`ws-conversations:${owner}:${ws.id}`)
  const rewound = await d.workspaces.patch(owner, ws.id, {
    sdk_session_id: checkpoint.sdk_session_id,
    seed_files: true,
    volume: null,
  })
  await d.checkpoints.dropAfter(owner, ws.id, to.id)
  await markRewound(d, owner, to, checkpoint.seq)
  return d.workspaces.view(rewound)
}

/** The tasks whose events follow the checkpoint get `rewound_at`; a `rewind` event names them. */
async function markRewound(d: RewindDeps, owner: string, to: TaskRecord, seq: number): Promise<void> {
  const later = new Set<string>()
  for (let after = seq; ; ) {
    const events = await d.eventLog.read(owner, to.workspace_id, { after, limit: PAGE })
    if (events.length === 0) break
    for (const e of events) if (e.task_id !== to.id) later.add(e.task_id)
    after = events[events.length - 1]!.seq
  }
  const at = isoNow(d.clock)
  for (const id of later) {
    const task = await d.tasks.records.find(owner, id)
    if (task && !task.rewound_at) await d.tasks.records.put({ ...task, rewound_at: at, updated_at: at })
  }
  await d.eventLog.append(owner, to.workspace_id, [{ type: 'rewind', task_id: to.id, rewound_task_ids: [...later] }])
  await d.eventLog.flush(owner, to.workspace_id)
}
