/** Where a workspace's files are right now: its own container, or a helper on its volume or kept files. */
import { ApiError } from '@berth/contract'
import { WORKSPACE_DIR } from '../tasks/materialize.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { WorkspaceRecord, WorkspacesService } from './workspaces.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'

/** The container holding a workspace's files, and how to let go of it. */
export interface FileTarget {
  engineId: string
  release(): Promise<void>
  /** After a write: keep what changed (a helper holding kept files copies them back). */
  written?(): Promise<void>
}

/** What {@link fileTarget} looks in. */
export interface FileTargetOptions {
  workspaces: WorkspacesService
  engine?: TaskEngine | undefined
  /** How long to wait for a helper container when the pool is full (default 30 s). */
  helperTimeoutMs?: number
  /** The kept files of released workspaces without a volume. */
  snapshots?: WorkspaceSnapshots | undefined
}

/**
 * The container holding the workspace's files: its own, a helper from the pool on its
 * volume (or with its kept files restored), or a 400 when its files are gone.
 *
 * @example
 * ```ts
 * const target = await fileTarget(o, 'usr_1', 'ws_1')
 * try { await runtime.listFiles(target.engineId, '/workspace', '') } finally { await target.release() }
 * ```
 */
export async function fileTarget(
  o: FileTargetOptions,
  owner: string,
  wsId: string,
  signal?: AbortSignal,
): Promise<FileTarget> {
  const ws = await o.workspaces.records.get(owner, wsId)
  const engine = o.engine
  if (engine && ws.container_id) {
    const c = engine.pool.list().find((x) => x.id === ws.container_id)
    if (c) return { engineId: c.engine_id, release: async () => {} }
  }
  if (engine && ws.volume) return helper(o, engine, ws, signal)
  const snapshots = o.snapshots
  if (engine && snapshots && (await snapshots.has(owner, wsId))) {
    const target = await helper(o, engine, ws, signal)
    try {
      await snapshots.restore(engine.runtime, target.engineId, owner, wsId)
    } catch (err) {
      await target.release()
      throw err
    }
    return { ...target, written: async () => void (await snapshots.save(engine.runtime, target.engineId, owner, wsId)) }
  }
  throw new ApiError(
    'VALIDATION_FAILED',
    ws.status === 'starting'
      ? `Workspace ${ws.id} has no container yet: its first task has not started. Try again once it runs.`
      : `Workspace ${ws.id} has no files to serve: its container was released and its kept files expired (or were too large to keep, or were dropped for the caller's quota of kept files).`,
    { issues: [{ location: 'params', path: 'id', message: 'the workspace has no container and no volume' }] },
  )
}

/** A short-lived container from the pool image with the workspace's volume mounted. */
async function helper(
  o: FileTargetOptions,
  engine: TaskEngine,
  ws: WorkspaceRecord,
  signal?: AbortSignal,
): Promise<FileTarget> {
  const timeout = AbortSignal.timeout(o.helperTimeoutMs ?? 30_000)
  const abort = signal ? AbortSignal.any([signal, timeout]) : timeout
  try {
    const lease = await engine.pool.claim({
      owner_id: ws.owner_id,
      purpose: 'batch',
      signal: abort,
      spec: ws.volume ? { mounts: [{ type: 'volume' as const, source: ws.volume, target: WORKSPACE_DIR }] } : undefined,
      labels: { 'berth.files': ws.id },
    })
    return { engineId: lease.container.engine_id, release: () => lease.release() }
  } catch (err) {
    if (!abort.aborted) throw err
    throw new ApiError('CONTAINER_FAILED', `No container was free to open workspace ${ws.id}'s volume in time`, {
      reason: 'unreachable',
    })
  }
}
