import { MANAGED_LABEL, type ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'

/** Whose volume it is: the labels every workspace volume carries. */
export interface VolumeOwner {
  /** The pool whose containers mount it (`berth.pool`). */
  pool: string
  owner_id: string
  workspace_id: string
}

/**
 * The name of a workspace's volume (persistent sessions): `berth-ws-<id>`.
 *
 * @example
 * ```ts
 * workspaceVolumeName('ws_abc') // 'berth-ws-abc'
 * ```
 */
export function workspaceVolumeName(workspaceId: string): string {
  return `berth-${workspaceId.replace('_', '-')}`
}

/**
 * Create a workspace's volume with the pool, owner and workspace labels (before a container
 * mounts it, which would create it unlabelled), so a restart can account for it. An existing
 * volume is left as it is. `sizeBytes` (the environment's `disk_mb`) limits a new volume where
 * the runtime sizes workspaces.
 *
 * @example
 * ```ts
 * await createWorkspaceVolume(runtime, 'berth-ws-abc', { pool: 'default', owner_id: 'usr_1', workspace_id: 'ws_abc' })
 * ```
 */
export async function createWorkspaceVolume(
  runtime: ContainerRuntime,
  name: string,
  who: VolumeOwner,
  sizeBytes?: number,
): Promise<void> {
  await runtime.createVolume(name, {
    labels: { 'berth.pool': who.pool, 'berth.owner': who.owner_id, 'berth.workspace': who.workspace_id },
    ...(sizeBytes && { sizeBytes }),
  })
}

/**
 * At start, account for the pool's volumes as the pool does for its containers: keep those
 * whose workspace still exists, remove the rest (their workspace was deleted while the
 * engine was away, or the server died between creating and recording them).
 *
 * @example
 * ```ts
 * await recoverVolumes(runtime, 'default', async (owner, ws) => (await workspaces.find(owner, ws)) !== null, logger)
 * ```
 */
export async function recoverVolumes(
  runtime: ContainerRuntime,
  pool: string,
  exists: (ownerId: string, workspaceId: string) => Promise<boolean>,
  logger: Logger,
): Promise<{ kept: number; removed: number }> {
  const found = await runtime.listVolumes({ labels: { [MANAGED_LABEL]: 'true', 'berth.pool': pool } })
  let kept = 0
  let removed = 0
  for (const v of found) {
    const owner = v.labels['berth.owner']
    const ws = v.labels['berth.workspace']
    if (owner && ws && (await exists(owner, ws))) {
      kept++
      continue
    }
    await runtime.removeVolume(v.name).then(
      () => removed++,
      // Still mounted by a container being removed, say: the next start tries again.
      (err: unknown) => logger.warn('could not remove an orphan volume', { volume: v.name, error: String(err) }),
    )
  }
  if (removed) logger.info('volumes recovered', { pool, kept, removed })
  return { kept, removed }
}
