/** Stopping a session: its container released wherever it is held, its agent and what that left running ended. */
import { ApiError, type Workspace } from '@berth/contract'
import type { OwnedCollection } from '../records/collection.js'
import { assertNoTask } from '../workspaces/session-task.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import type { Dispatcher } from './dispatch.js'
import type { SessionContainers } from './session-containers.js'
import type { TaskRecord } from './task.js'

export interface StopSessionDeps {
  tasks: { records: OwnedCollection<TaskRecord>; containers: SessionContainers; dispatch: Dispatcher }
  workspaces: WorkspacesService
  /** How long to wait for another instance to release the container (default 10 s). */
  waitMs?: number
}

/**
 * Stop a session now, as its idle timer would: its living agent ends (its background work
 * stopped), its files and conversation are kept (the next follow-up resumes them in a new
 * container), and its container, slot and memory go back. Refused (409) while a task of the
 * workspace is queued or under way; a workspace without a container is left as it is. A
 * container another instance holds is released there (asked over the coordination), and
 * the answer waits until the workspace shows it; 502 CONTAINER_FAILED when it does not in time.
 *
 * @example
 * ```ts
 * const ws = await stopSession({ tasks, workspaces }, 'usr_1', 'ws_1') // ws.status: 'idle'
 * ```
 */
export async function stopSession(d: StopSessionDeps, owner: string, wsId: string): Promise<Workspace> {
  await release(d, owner, wsId)
  return d.workspaces.get(owner, wsId)
}

async function release(d: StopSessionDeps, owner: string, wsId: string): Promise<void> {
  const { containers, dispatch } = d.tasks
  const ws = await d.workspaces.records.get(owner, wsId)
  await assertNoTask(d, owner, ws, 'stop')
  if (containers.has(wsId)) return containers.stop(owner, wsId)
  if (!ws.container_id || !ws.instance_id || ws.instance_id === dispatch.instanceId) return
  // Its holder is gone (its lost tasks are another matter): the container went with it.
  if (!(await dispatch.isAlive(ws.instance_id))) {
    await d.workspaces.setStatus(owner, wsId, 'idle', { container_id: null, agent: null })
    return
  }
  await dispatch.requestRelease(owner, wsId)
  const deadline = Date.now() + (d.waitMs ?? 10_000)
  for (;;) {
    const now = await d.workspaces.records.find(owner, wsId)
    if (!now?.container_id) return
    if (Date.now() > deadline)
      throw new ApiError(
        'CONTAINER_FAILED',
        `Workspace ${wsId}'s container is held by instance ${now.instance_id ?? 'unknown'}, which did not release it in time`,
      )
    await new Promise((r) => setTimeout(r, 100))
  }
}
