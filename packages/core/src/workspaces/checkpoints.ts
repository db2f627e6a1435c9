/** Every finished task of a session as a checkpoint: taken from its container as it ends, kept, listed, dropped. */
import { KeyedMutex } from '../internal/mutex.js'
import type { BlobStore } from '../ports/blob-store.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { TaskEngine } from '../tasks/engine.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'
import type { TaskRecord } from '../tasks/task.js'
import { CheckpointStore, type CheckpointRecord } from './checkpoint-store.js'
import { manifestTar, readManifest } from './checkpoint-tar.js'
import type { EventLog } from './event-log.js'
import type { WorkspaceRecord } from './workspaces.js'

export type { CheckpointRecord } from './checkpoint-store.js'

export interface CheckpointsOptions {
  store: Store
  /** Where manifests and contents go (the server: files under `<dataDir>/snapshots`). */
  blobs: BlobStore
  clock: Clock
  logger: Logger
  engine: TaskEngine | undefined
  eventLog: EventLog
  /** The newest checkpoints kept per session (default 50; 0: none are taken). */
  maxPerSession?: number
  /** A workspace whose files add up to more is not checkpointed (bytes; default 1 GiB). */
  maxBytes?: number
  /** Checkpoints older than this go (default 7 days, as kept files; null: kept until the workspace is deleted). */
  retentionMs?: number | null
}

/** The defaults of {@link CheckpointsOptions}. */
export const CHECKPOINT_DEFAULTS = { maxPerSession: 50, maxBytes: 1024 * 1024 * 1024, retentionMs: 7 * 24 * 3600_000 }

/** Paths of the workspace never checkpointed: the runner's event files, and ext4's own directory of an older disk. */
const EXCLUDED = ['.berth/events', 'lost+found']
const excluded = (path: string) => EXCLUDED.some((x) => path === x || path.startsWith(`${x}/`))

/**
 * The checkpoints of sessions. When a session task that started ends, its run calls
 * {@link keep} before the container is kept warm or released: `/workspace` is read once
 * through the runtime (the conversation under `.berth/claude` with it, the runner's event
 * files without), each file hashed, and only contents the session has not kept yet are
 * stored (see {@link CheckpointStore}), with a manifest and the conversation's id. The newest
 * `maxPerSession` within `retentionMs` are kept; a workspace over `maxBytes` is skipped (and
 * logged). A fork starts from one, a rewind takes its session back to one.
 *
 * @example
 * ```ts
 * await checkpoints.keep(task, workspace, 'sdk-session-1') // at the task's end
 * const tar = await checkpoints.files('usr_1', 'ws_1', 'task_2') // its files, to put back
 * ```
 */
export class Checkpoints {
  private readonly kept: CheckpointStore
  /** One writer per session on this instance (its runs, rewinds and deletion are apart already). */
  private readonly lock = new KeyedMutex()
  private readonly max: number
  private readonly maxBytes: number
  private readonly retentionMs: number | null

  constructor(private readonly o: CheckpointsOptions) {
    this.kept = new CheckpointStore(o.store, o.blobs)
    this.max = o.maxPerSession ?? CHECKPOINT_DEFAULTS.maxPerSession
    this.maxBytes = o.maxBytes ?? CHECKPOINT_DEFAULTS.maxBytes
    this.retentionMs = o.retentionMs === undefined ? CHECKPOINT_DEFAULTS.retentionMs : o.retentionMs
  }

  /**
   * Keep the checkpoint of a session task that ran, from the container its workspace holds
   * (`ws` as the run stored it, `sdkSessionId` the conversation it left). Never throws: a
   * checkpoint that fails is logged and the task ends as it would have.
   */
  async keep(task: TaskRecord, ws: WorkspaceRecord, sdkSessionId: string | null): Promise<void> {
    if (task.mode !== 'session' || !task.started_at || this.max === 0) return
    const engine = this.o.engine
    const container = engine?.pool.list().find((c) => c.id === ws.container_id)
    if (!engine || !container) return
    await this.lock
      .run(`${task.owner_id}:${ws.id}`, () => this.take(engine.runtime, container.engine_id, task, sdkSessionId))
      .catch((err: unknown) =>
        this.o.logger.warn('could not keep a checkpoint', { task: task.id, workspace: ws.id, error: String(err) }),
      )
  }

  /** The session's checkpoints within the retention, oldest first. */
  async list(owner: string, wsId: string): Promise<CheckpointRecord[]> {
    const now = this.o.clock.now()
    return (await this.kept.index(owner, wsId)).filter((c) => !this.expired(c, now))
  }

  /** One task's checkpoint, or null (never taken, dropped or expired). */
  async find(owner: string, wsId: string, taskId: string): Promise<CheckpointRecord | null> {
    return (await this.list(owner, wsId)).find((c) => c.task_id === taskId) ?? null
  }

  /** A task's checkpointed files as a tar relative to `/workspace` (what `putArchive` there takes), or null. */
  async files(owner: string, wsId: string, taskId: string): Promise<Uint8Array | null> {
    if (!(await this.find(owner, wsId, taskId))) return null
    const entries = await this.kept.manifest(owner, wsId, taskId)
    return entries && manifestTar(entries, (hash) => this.kept.object(owner, wsId, hash))
  }

  /** Drop the checkpoints of the tasks after `taskId` (a rewind to it). */
  async dropAfter(owner: string, wsId: string, taskId: string): Promise<void> {
    await this.lock.run(`${owner}:${wsId}`, async () => {
      const items = await this.kept.index(owner, wsId)
      const at = items.findIndex((c) => c.task_id === taskId)
      if (at < 0 || at === items.length - 1) return
      const refs = await this.kept.refs(owner, wsId)
      await this.kept.commit(owner, wsId, items.slice(0, at + 1), { refs, dropped: items.slice(at + 1) })
    })
  }

  /** Every checkpoint of a workspace, with its contents (the workspace is deleted). */
  async remove(owner: string, wsId: string): Promise<void> {
    await this.lock.run(`${owner}:${wsId}`, () => this.kept.removeAll(owner, wsId))
  }

  private async take(
    runtime: ContainerRuntime,
    engineId: string,
    task: TaskRecord,
    sdkSessionId: string | null,
  ): Promise<void> {
    const { owner_id: owner, workspace_id: wsId } = task
    const refs = await this.kept.refs(owner, wsId)
    const written = new Set<string>()
    let added = 0
    let committed = false
    try {
      const archive = (await runtime.getArchive(engineId, WORKSPACE_DIR)) as unknown as AsyncIterable<Uint8Array>
      const read = await readManifest(archive, {
        base: WORKSPACE_DIR.slice(1),
        exclude: excluded,
        maxBytes: this.maxBytes,
        onFile: async (hash, bytes) => {
          if (refs.has(hash) || written.has(hash)) return
          await this.kept.putObject(owner, wsId, hash, bytes)
          written.add(hash)
          added += bytes.byteLength
        },
      })
      if (!read) {
        await this.kept.removeObjects(owner, wsId, written)
        this.o.logger.warn('workspace too large for a checkpoint', {
          task: task.id,
          workspace: wsId,
          max_bytes: this.maxBytes,
        })
        return
      }
      added += await this.kept.putManifest(owner, wsId, task.id, read.entries)
      const record: CheckpointRecord = {
        task_id: task.id,
        created_at: isoNow(this.o.clock),
        sdk_session_id: sdkSessionId,
        seq: await this.o.eventLog.count(owner, wsId),
        files: read.entries.filter((e) => e.type === 'file').length,
        bytes: read.bytes,
        added_bytes: added,
      }
      const items = [...(await this.kept.index(owner, wsId)).filter((c) => c.task_id !== task.id), record]
      const now = this.o.clock.now()
      const fresh = items.filter((c) => !this.expired(c, now))
      const keep = fresh.slice(Math.max(0, fresh.length - this.max))
      const dropped = items.filter((c) => !keep.includes(c))
      const commit = this.kept.commit(owner, wsId, keep, { refs, added: read.entries, dropped })
      committed = true
      await commit
    } catch (err) {
      // Contents no manifest names are not left behind (once counted, they are the checkpoint's).
      if (!committed) await this.kept.removeObjects(owner, wsId, written).catch(() => {})
      throw err
    }
  }

  private expired(c: CheckpointRecord, now: number): boolean {
    return this.retentionMs !== null && now - Date.parse(c.created_at) > this.retentionMs
  }
}
