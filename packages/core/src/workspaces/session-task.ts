/** The checks a fork and a rewind share: a session's workspace, one of its finished tasks, no task under way. */
import { ACTIVE_TASK_STATUSES, ApiError, isEndedStatus, notFound, validationError } from '@berth/contract'
import type { OwnedCollection } from '../records/collection.js'
import type { TaskRecord } from '../tasks/task.js'
import type { EventLog } from './event-log.js'
import type { WorkspaceRecord } from './workspaces.js'

/** What the checks read. */
export interface SessionTaskDeps {
  tasks: { records: OwnedCollection<TaskRecord> }
  eventLog: EventLog
}

/** What is done to the session, in the messages. */
export type SessionAction = 'fork' | 'rewind' | 'stop'

/**
 * The task of the workspace's newest transcript event: the latest task that ran in it (or,
 * after a rewind, the task it went back to).
 *
 * @example
 * ```ts
 * await latestTaskId(deps, 'usr_1', 'ws_1') // 'task_3', or null before any event
 * ```
 */
export async function latestTaskId(d: SessionTaskDeps, owner: string, wsId: string): Promise<string | null> {
  const count = await d.eventLog.count(owner, wsId)
  if (count === 0) return null
  const [last] = await d.eventLog.read(owner, wsId, { after: count - 1, limit: 1 })
  return last?.task_id ?? null
}

/**
 * 400 when the workspace's latest task is a batch task's: it has no session.
 *
 * @example
 * ```ts
 * await assertSession(deps, 'usr_1', ws, 'rewind', await latestTaskId(deps, 'usr_1', ws.id))
 * ```
 */
export async function assertSession(
  d: SessionTaskDeps,
  owner: string,
  src: WorkspaceRecord,
  action: SessionAction,
  latestId: string | null,
): Promise<TaskRecord | null> {
  const latest = latestId ? await d.tasks.records.find(owner, latestId) : null
  if (latest?.mode === 'batch')
    throw validationError(
      [{ location: 'params', path: 'id', message: `a batch task’s workspace has no session to ${action}` }],
      `Workspace ${src.id} belongs to a batch task: only a session can be ${action === 'fork' ? 'forked' : 'rewound'}`,
    )
  return latest
}

/**
 * The caller's task `taskId` of workspace `src`, finished: 404 when it is not the caller's,
 * 400 when it belongs to another workspace (naming `field`), 409 while it has not ended.
 *
 * @example
 * ```ts
 * const at = await finishedTask(deps, 'usr_1', ws, 'task_2', 'to_task_id', 'rewind')
 * ```
 */
export async function finishedTask(
  d: SessionTaskDeps,
  owner: string,
  src: WorkspaceRecord,
  taskId: string,
  field: string,
  action: SessionAction,
): Promise<TaskRecord> {
  const at = await d.tasks.records.find(owner, taskId)
  if (!at) throw notFound('task', taskId)
  if (at.workspace_id !== src.id)
    throw validationError(
      [{ location: 'body', path: field, message: `task ${taskId} is not a task of workspace ${src.id}` }],
      `Task ${taskId} belongs to another workspace`,
    )
  if (!isEndedStatus(at.status))
    throw new ApiError('CONFLICT', `Task ${taskId} is ${at.status}: ${action} once it has finished`, {
      task_id: taskId,
      status: at.status,
    })
  return at
}

/**
 * The 409 for a finished task without a checkpoint, saying why it has none.
 *
 * @example
 * ```ts
 * throw noCheckpoint(task, 'fork')
 * ```
 */
export function noCheckpoint(at: TaskRecord, action: SessionAction): ApiError {
  const why = at.rewound_at
    ? `its session was rewound to an earlier task at ${at.rewound_at}, and its checkpoint went with it`
    : at.started_at
      ? 'its checkpoint was not kept or is gone: past the newest BERTH_CHECKPOINT_MAX_PER_SESSION of the session, past the kept files’ retention, larger than BERTH_CHECKPOINT_MAX_MB, or from before checkpoints'
      : 'it ended before it started running, so there is nothing of it to go back to'
  return new ApiError('CONFLICT', `Task ${at.id} has no checkpoint to ${action} at: ${why}`, {
    task_id: at.id,
    rewound_at: at.rewound_at ?? null,
  })
}

/**
 * 409 while a task of the workspace is queued, starting or running (in the records every instance shares).
 *
 * @example
 * ```ts
 * await assertNoTask(deps, 'usr_1', ws, 'fork')
 * ```
 */
export async function assertNoTask(
  d: Pick<SessionTaskDeps, 'tasks'>,
  owner: string,
  src: WorkspaceRecord,
  action: SessionAction,
): Promise<void> {
  for (const status of ACTIVE_TASK_STATUSES) {
    for (let page = 1; ; page++) {
      const { items, total } = await d.tasks.records.list(owner, { page, limit: 100 }, `status=${status}`)
      const busy = items.find((t) => t.workspace_id === src.id)
      if (busy)
        throw new ApiError(
          'CONFLICT',
          `Task ${busy.id} is ${status} in workspace ${src.id}: ${action} once it has finished (or cancel it)`,
          { task_id: busy.id, status },
        )
      if (page * 100 >= total) break
    }
  }
}
