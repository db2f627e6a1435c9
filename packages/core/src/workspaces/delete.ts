/** Deleting a workspace for good: its tasks, container, volume, log, conversation, files, checkpoints and row. */
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { TasksService } from '../tasks/service.js'
import type { Checkpoints } from './checkpoints.js'
import type { EventLog } from './event-log.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'
import type { WorkspacesService } from './workspaces.js'

/** What a deletion reaches. */
export interface DeleteWorkspaceDeps {
  store: Store
  logger: Logger
  workspaces: WorkspacesService
  tasks: Pick<TasksService, 'stopWorkspace'>
  engine: TaskEngine | undefined
  eventLog: EventLog
  snapshots: WorkspaceSnapshots
  checkpoints: Checkpoints
}

/**
 * Stop a workspace's tasks, reap its container and volume, drop its log, conversation, kept files, checkpoints and row.
 *
 * @example
 * ```ts
 * await deleteWorkspace({ store, logger, workspaces, tasks, engine, eventLog, snapshots, checkpoints }, 'usr_1', 'ws_1')
 * ```
 */
export async function deleteWorkspace(d: DeleteWorkspaceDeps, owner: string, id: string): Promise<void> {
  const ws = await d.workspaces.records.get(owner, id)
  await d.tasks.stopWorkspace(owner, id)
  if (ws.volume && d.engine) {
    await d.engine.runtime
      .removeVolume(ws.volume)
      .catch((err: unknown) =>
        d.logger.warn('could not remove a workspace volume', { volume: ws.volume, error: String(err) }),
      )
  }
  await d.eventLog.remove(owner, id)
  await d.store.remove(`ws-conversations:${owner}:${id}`)
  await d.snapshots.remove(owner, id)
  await d.checkpoints.remove(owner, id)
  await d.workspaces.removeRecord(owner, id)
}
