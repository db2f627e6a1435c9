/** What a submit checks before it takes a slot or writes anything: the session it follows up, and whether its container could ever fit the host's memory. */
import { validationError, type SubmitTask } from '@berth/contract'
import type { EnvironmentsService } from '../resources/environments.js'
import type { ProfileRecord } from '../resources/profiles.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import type { TaskEngine } from './engine.js'

/** The workspace of a follow-up's `session_id` (null for a new workspace), or 400 naming the field. */
export async function sessionWorkspace(
  workspaces: WorkspacesService,
  owner: string,
  input: Pick<SubmitTask, 'session_id'>,
  profile: ProfileRecord,
): Promise<WorkspaceRecord | null> {
  if (!input.session_id) return null
  const ws = await workspaces.bySession(owner, input.session_id)
  if (!ws)
    throw validationError([
      { location: 'body', path: 'session_id', message: `session ${input.session_id} does not exist` },
    ])
  if (ws.profile_id !== profile.id)
    throw validationError([
      {
        location: 'body',
        path: 'profile_id',
        message: `session ${input.session_id} belongs to profile ${ws.profile_id}`,
      },
    ])
  return ws
}

/**
 * 400 when the task's container (its profile's environment's memory cap, or the pool's
 * default) is larger than the host's whole memory budget: it could never be admitted, so
 * it is refused now rather than left waiting forever.
 */
export async function assertFitsMemory(
  engine: TaskEngine | undefined,
  environments: EnvironmentsService,
  owner: string,
  profile: ProfileRecord,
): Promise<void> {
  const pool = engine?.pool
  if (!pool?.memoryBudget) return
  const bytes = await environments.memoryBytes(owner, profile.environment_id)
  pool.assertFits(bytes)
}
