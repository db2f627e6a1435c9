import { repackTar } from '../internal/tar-repack.js'
import type { BlobStore } from '../ports/blob-store.js'
import type { Clock } from '../ports/clock.js'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'

export interface WorkspaceSnapshotsOptions {
  store: Store
  /** Where the tars go (the server: files under the data dir). */
  blobs: BlobStore
  clock: Clock
  logger: Logger
  /** How long a released workspace's files stay readable (default 7 days; `null`: until the workspace is deleted). */
  retentionMs?: number | null
  /** Workspaces larger than this (tar bytes) are not kept (default 50 MiB). */
  maxBytes?: number
  /** A caller's kept files, at most (tar bytes; default 1 GiB): the oldest are dropped to make room. */
  quotaBytes?: number
}

/** The record of a kept snapshot: the tar is a blob (`file`); rows from before kept it here, base64 (`tar`). */
interface Snapshot {
  file?: string
  bytes?: number
  /** Legacy: the tar, base64, in the record itself. */
  tar?: string
  saved_at: number
}

const PREFIX = 'ws-files:'
const key = (owner: string, wsId: string) => `${PREFIX}${owner}:${wsId}`
const blobKey = (owner: string, wsId: string) => `${owner}/${wsId}.tar`
const sizeOf = (s: Snapshot) => s.bytes ?? Math.floor(((s.tar?.length ?? 0) * 3) / 4)

/**
 * The files of a workspace without a volume, kept when its container is released (a batch
 * task's container is reaped when it ends), so they stay readable until the workspace is
 * deleted or the retention expires. One tar per workspace in the blob store, its record
 * (size, time) in the store; each caller's kept files stay under a quota, the oldest
 * dropped first (a tar larger than the whole quota is not kept, and the log says why).
 *
 * @example
 * ```ts
 * await snapshots.save(runtime, engineId, 'usr_1', 'ws_1') // before the container is reaped
 * await snapshots.restore(runtime, helperId, 'usr_1', 'ws_1') // into a helper container
 * ```
 */
export class WorkspaceSnapshots {
  constructor(private readonly o: WorkspaceSnapshotsOptions) {}

  /** Copy `/workspace` out of a container into the blob store; too large → not kept (and said so). */
  async save(runtime: ContainerRuntime, engineId: string, owner: string, wsId: string): Promise<boolean> {
    const max = this.o.maxBytes ?? 50 * 1024 * 1024
    const quota = this.o.quotaBytes ?? 1024 * 1024 * 1024
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
      if (size > Math.min(max, quota)) {
        await entries.return(undefined)
        this.o.logger.warn('workspace files too large to keep after release', {
          workspace: wsId,
          max_bytes: max,
          quota_bytes: quota,
        })
        await this.remove(owner, wsId)
        return false
      }
      chunks.push(chunk)
    }
    await this.makeRoom(owner, wsId, quota - size)
    await this.o.blobs.put(blobKey(owner, wsId), Buffer.concat(chunks))
    await this.o.store.set<Snapshot>(key(owner, wsId), {
      file: blobKey(owner, wsId),
      bytes: size,
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
    const tar = s.file ? await this.o.blobs.get(s.file) : s.tar ? new Uint8Array(Buffer.from(s.tar, 'base64')) : null
    if (!tar) return false
    await runtime.putArchive(engineId, WORKSPACE_DIR, tar)
    return true
  }

  /** Keep a copy of one workspace's kept files as another's (a fork); false when none are kept. */
  async copy(owner: string, fromWs: string, toWs: string): Promise<boolean> {
    const s = await this.read(owner, fromWs)
    if (!s) return false
    const now = this.o.clock.now()
    if (!s.file) {
      await this.o.store.set<Snapshot>(key(owner, toWs), { tar: s.tar, saved_at: now })
      return true
    }
    const tar = await this.o.blobs.get(s.file)
    return tar ? this.put(owner, toWs, tar) : false
  }

  /** Whether kept files of `bytes` fit in a caller's quota at all (what {@link put} takes). */
  fits(bytes: number): boolean {
    return bytes <= (this.o.quotaBytes ?? 1024 * 1024 * 1024)
  }

  /**
   * Keep `tar` (relative to `/workspace`) as a workspace's files: a fork's or a rewind's,
   * which its next task puts into its container. It counts against the caller's quota like
   * any kept files (other workspaces' oldest make room); false when larger than the quota.
   */
  async put(owner: string, wsId: string, tar: Uint8Array): Promise<boolean> {
    const quota = this.o.quotaBytes ?? 1024 * 1024 * 1024
    if (!this.fits(tar.byteLength)) return false
    await this.makeRoom(owner, wsId, quota - tar.byteLength)
    await this.o.blobs.put(blobKey(owner, wsId), tar)
    await this.o.store.set<Snapshot>(key(owner, wsId), {
      file: blobKey(owner, wsId),
      bytes: tar.byteLength,
      saved_at: this.o.clock.now(),
    })
    return true
  }

  async remove(owner: string, wsId: string): Promise<void> {
    const s = await this.o.store.get<Snapshot>(key(owner, wsId))
    if (s?.file) await this.o.blobs.remove(s.file)
    await this.o.store.remove(key(owner, wsId))
  }

  /** Drop this caller's oldest kept files (never `wsId`'s own, replaced anyway) until `room` bytes are left. */
  private async makeRoom(owner: string, wsId: string, room: number): Promise<void> {
    const keys = (await this.o.store.keys(`${PREFIX}${owner}:`)).filter((k) => k !== key(owner, wsId))
    const kept = (await this.o.store.getMany<Snapshot>(keys))
      .map((s, i) => ({ s, ws: keys[i]!.slice(`${PREFIX}${owner}:`.length) }))
      .filter((x): x is { s: Snapshot; ws: string } => x.s !== null)
      .sort((a, b) => a.s.saved_at - b.s.saved_at)
    let used = kept.reduce((n, x) => n + sizeOf(x.s), 0)
    for (const x of kept) {
      if (used <= room) break
      await this.remove(owner, x.ws)
      used -= sizeOf(x.s)
      this.o.logger.info('kept workspace files dropped for the caller quota', { workspace: x.ws, bytes: sizeOf(x.s) })
    }
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
