/** What is done to a workspace as a whole: delete it, fork it, rewind it, stop its session. */
import type { ForkWorkspace, RewindWorkspace, Workspace } from '@berth/contract'
import { stopSession } from '../tasks/stop-session.js'
import { deleteWorkspace, type DeleteWorkspaceDeps } from './delete.js'
import { forkWorkspace, type ForkDeps } from './fork.js'
import { rewindWorkspace, type RewindDeps } from './rewind.js'

/** The operations on a whole workspace that `Services` offers the routes. */
export interface SessionOps {
  /** Delete a workspace for good: stop its tasks, reap its container and volume, drop its log and row. */
  deleteWorkspace(owner: string, id: string): Promise<void>
  /** Fork a session: a new workspace with a copy of its files, conversation and transcript. */
  forkWorkspace(owner: string, id: string, input: ForkWorkspace): Promise<Workspace>
  /** Take a session back to one of its finished tasks: its files, conversation and checkpoints. */
  rewindWorkspace(owner: string, id: string, input: RewindWorkspace): Promise<Workspace>
  /** Stop a session now: its agent ends and its container is released, wherever it is held. */
  stopSession(owner: string, id: string): Promise<Workspace>
}

/**
 * The workspace operations over the services they need.
 *
 * @example
 * ```ts
 * const ops = sessionOps({ store, clock, logger, workspaces, tasks, engine, eventLog, snapshots, checkpoints })
 * await ops.stopSession('usr_1', 'ws_1')
 * ```
 */
export function sessionOps(
  d: DeleteWorkspaceDeps & ForkDeps & RewindDeps & Parameters<typeof stopSession>[0],
): SessionOps {
  return {
    deleteWorkspace: (owner, id) => deleteWorkspace(d, owner, id),
    forkWorkspace: (owner, id, input) => forkWorkspace(d, owner, id, input),
    rewindWorkspace: (owner, id, input) => rewindWorkspace(d, owner, id, input),
    stopSession: (owner, id) => stopSession(d, owner, id),
  }
}
