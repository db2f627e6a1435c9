import type { Store } from '../ports/store.js'
import { OwnedCollection } from '../records/collection.js'
import type { PooledContainer } from '../runtime/index.js'
import type { WorkspaceRecord } from './workspaces.js'

/**
 * The pool's `adopt` rule at start: keep an in-use container when its workspace still has
 * work (a task that was running, or a warm session), read from the workspace records.
 *
 * @example
 * ```ts
 * new ContainerPool({ runtime, store, image, adopt: adoptRunningWorkspaces(store) })
 * ```
 */
export function adoptRunningWorkspaces(
  store: Store,
): (c: Pick<PooledContainer, 'owner_id' | 'workspace_id'>) => Promise<boolean> {
  const records = new OwnedCollection<WorkspaceRecord>(store, 'workspaces', 'workspace')
  return async (c) => {
    if (!c.owner_id || !c.workspace_id) return false
    return (await records.find(c.owner_id, c.workspace_id))?.status === 'running'
  }
}
