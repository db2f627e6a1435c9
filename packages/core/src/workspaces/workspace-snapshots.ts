import { repackTar } from '../internal/tar-repack.js'
import type { Clock } from '../ports/clock.js'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'

export interface WorkspaceSnapshotsOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** How long a released workspace's files stay readable (default 7 days; `null`: until the workspace is deleted). */
  retentionMs?: number | null
  /** Workspaces larger than this (tar bytes) are not kept (default 50 MiB). */
  maxBytes?: number
}

interface Snapshot {
  /** The tar of `/workspace`'s contents, names relative to it. */
  tar: string
  saved_at: number
}

const key = (owner: string, wsId: string) => `ws-files:${owner}:${wsId}`

/**
 * The files of a workspace without a volume, kept when its container is released (a batch
 * task's container is reaped when it ends), so they stay readable until the workspace is
 * deleted or the retention expires. Stored as one tar per workspace in the store.
 *
 * @example
 * ```ts
 * await snapshots.save(runtime, engineId, 'usr_1', 'ws_1') // before the container is reaped
 * await snapshots.restore(runtime, helperId, 'usr_1', 'ws_1') // into a helper container
 * ```
 */
export class WorkspaceSnapshots {
  constructor(private readonly o: WorkspaceSnapshotsOptions) {}

  /** Copy `/workspace` out of a container into the store; too large → not kept (and said so). */
  async save(runtime: ContainerRuntime, engineId: string, owner: string, wsId: string): Promise<boolean> {
    const max = this.o.maxBytes ?? 50 * 1024 * 1024
    const base = WORKSPACE_DIR.slice(1)
    const tar = (await runtime.getArchive(engineId, WORKSPACE_DIR)) as unknown as AsyncIterable<Uint8Array>
    const chunks: Uint8Array[] = []
    let size = 0
    const entries = repackTar([
      {
        archive: tar,
        rename: (name) => {
          const plain = name.replace(/^\.\//, '')
          if (plain === base || plain === `${base}/`) return null
          return plain.startsWith(`${base}/`) ? plain.slice(base.length + 1) : null
        },
      },
    ])
    for await (const chunk of entries) {
      size += chunk.byteLength
      if (size > max) {
        await entries.return(undefined)
        this.o.logger.warn('workspace files too large to keep after release', { workspace: wsId, max_bytes: max })
        await this.o.store.remove(key(owner, wsId))
        return false
      }
      chunks.push(chunk)
    }
    await this.o.store.set<Snapshot>(key(owner, wsId), {
      tar: Buffer.concat(chunks).toString('base64'),
      saved_at: this.o.clock.now(),
    })
    return true
  }

  /** Whether kept files exist (and have not expired). */
  async has(owner: string, wsId: string): Promise<boolean> {
    return (await this.read(owner, wsId)) !== null
  }

  /** Put kept files into a container's `/workspace`; false when none are kept. */
  async restore(runtime: ContainerRuntime, engineId: string, owner: string, wsId: string): Promise<boolean> {
    const s = await this.read(owner, wsId)
    if (!s) return false
    await runtime.putArchive(engineId, WORKSPACE_DIR, new Uint8Array(Buffer.from(s.tar, 'base64')))
    return true
  }

  /** Keep a copy of one workspace's kept files as another's (a fork); false when none are kept. */
  async copy(owner: string, fromWs: string, toWs: string): Promise<boolean> {
    const s = await this.read(owner, fromWs)
    if (s) await this.o.store.set<Snapshot>(key(owner, toWs), { tar: s.tar, saved_at: this.o.clock.now() })
    return s !== null
  }

  async remove(owner: string, wsId: string): Promise<void> {
    await this.o.store.remove(key(owner, wsId))
  }

  private async read(owner: string, wsId: string): Promise<Snapshot | null> {
    const s = await this.o.store.get<Snapshot>(key(owner, wsId))
    if (!s) return null
    const retention = this.o.retentionMs === undefined ? 7 * 24 * 3600_000 : this.o.retentionMs
    if (retention !== null && this.o.clock.now() - s.saved_at > retention) {
      await this.remove(owner, wsId)
      return null
    }
    return s
  }
}
