import {
  newId,
  Workspace,
  WorkspaceSummary,
  type UpdateWorkspace,
  type WorkspaceStatus,
  notFound,
} from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import type { ReadCache } from '../records/read-cache.js'
import { toView } from '../records/view.js'

/** A stored workspace: the API fields plus what the task runner needs to continue it. */
export interface WorkspaceRecord extends OwnedRecord, Workspace {
  /** The agent SDK's conversation id, for resuming. */
  sdk_session_id: string | null
  /** Named volume holding `/workspace` (persistent sessions). */
  volume: string | null
  /** A playbook workspace claimed as a messenger thread shows in lists. */
  thread_claimed: boolean
  /** The Berth instance whose process holds the workspace's container (several instances). */
  instance_id?: string | null
  /** A fork's copied files wait as its kept files until its first container (see `SessionContainers.lease`). */
  seed_files?: boolean
}

/**
 * Workspace records and the session-id index. Containers, files and transcripts are the
 * task runner's and the event log's; this keeps the row.
 *
 * @example
 * ```ts
 * const ws = await workspaces.create('usr_1', { profile_id: 'prof_1', persistent: false })
 * await workspaces.bySession('usr_1', ws.session_id) // the same record
 * ```
 */
export class WorkspacesService {
  readonly records: OwnedCollection<WorkspaceRecord>
  /** Each workspace's last write under way here (see {@link WorkspacesService.patch}). */
  private readonly writing = new Map<string, Promise<void>>()

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** This instance's cache of views (with it, `store` is the one `reads.watch` made). */
    reads?: ReadCache,
  ) {
    this.records = new OwnedCollection<WorkspaceRecord>(store, 'workspaces', 'workspace', reads)
  }

  // One function for every read, so the read cache knows its views.
  readonly view = (r: WorkspaceRecord): Workspace =>
    // Records from before forks have no `forked_from`, from before living agents no `agent`.
    toView(Workspace, r, { forked_from: r.forked_from ?? null, agent: r.agent ?? null })

  summary(r: WorkspaceRecord): WorkspaceSummary {
    return toView(WorkspaceSummary, r)
  }

  async create(
    owner: string,
    input: { id?: string; profile_id: string; persistent: boolean; session_id?: string; name?: string },
  ): Promise<WorkspaceRecord> {
    const now = isoNow(this.clock)
    const id = input.id ?? newId('workspace')
    const record: WorkspaceRecord = {
      id,
      owner_id: owner,
      session_id: input.session_id ?? newId('session'),
      profile_id: input.profile_id,
      status: 'starting',
      name: input.name ?? 'Untitled workspace',
      starred: false,
      pinned: false,
      archived: false,
      tags: [],
      public_preview: false,
      model_override: null,
      container_id: null,
      persistent: input.persistent,
      forked_from: null,
      agent: null,
      sdk_session_id: null,
      volume: null,
      thread_claimed: false,
      created_at: now,
      updated_at: now,
      last_active_at: now,
    }
    await this.records.put(record)
    await this.store.set(`ws-sessions:${owner}:${record.session_id}`, { workspace_id: id })
    return record
  }

  /** The workspace of a session id, or `null` (absent or another owner's). */
  async bySession(owner: string, sessionId: string): Promise<WorkspaceRecord | null> {
    const ref = await this.store.get<{ workspace_id: string }>(`ws-sessions:${owner}:${sessionId}`)
    return ref ? this.records.find(owner, ref.workspace_id) : null
  }

  /**
   * Change fields of the stored record (read-modify-write of the latest copy). The writes of
   * one workspace on this instance go one at a time, so two of them (a run's status and its
   * living agent's background list, say) never undo each other.
   */
  patch(owner: string, id: string, changes: Partial<WorkspaceRecord>): Promise<WorkspaceRecord> {
    const before = this.writing.get(id) ?? Promise.resolve()
    const write = before.then(async () => {
      const r = await this.records.get(owner, id)
      return this.records.put({ ...r, ...changes, updated_at: isoNow(this.clock) })
    })
    const settled = write.then(
      () => {},
      () => {},
    )
    this.writing.set(id, settled)
    void settled.then(() => {
      if (this.writing.get(id) === settled) this.writing.delete(id)
    })
    return write
  }

  async setStatus(
    owner: string,
    id: string,
    status: WorkspaceStatus,
    extra: Partial<WorkspaceRecord> = {},
  ): Promise<WorkspaceRecord> {
    return this.patch(owner, id, { status, last_active_at: isoNow(this.clock), ...extra })
  }

  /** A workspace (a session's too) from the read cache: its status changes with every task, so it is never final. */
  get(owner: string, id: string): Promise<Workspace> {
    return this.records.view(owner, id, this.view)
  }

  /** The list: playbook-only workspaces (`pb-` sessions) are left out unless claimed as a thread. */
  async list(
    owner: string,
    page: Page,
    filter: { status?: WorkspaceStatus | undefined },
  ): Promise<Paged<WorkspaceSummary>> {
    // The `listed` index leaves playbook-only workspaces out (see INDEXES).
    const { items, total, next } = await this.records.list(
      owner,
      page,
      filter.status === undefined ? 'listed' : `listed,status=${filter.status}`,
    )
    return { items: items.map((r) => this.summary(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateWorkspace): Promise<Workspace> {
    const changes = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined))
    return this.view(await this.patch(owner, id, changes))
  }

  /** Remove the row and the session index (the caller removes container, volume and log). */
  async removeRecord(owner: string, id: string): Promise<WorkspaceRecord> {
    const r = await this.records.remove(owner, id)
    await this.store.remove(`ws-sessions:${owner}:${r.session_id}`)
    return r
  }

  /** Every workspace of every owner in a status (for recovery). */
  async allWithStatus(statuses: WorkspaceStatus[]): Promise<WorkspaceRecord[]> {
    const keys = await this.store.keys('workspaces:')
    return (await this.store.getMany<WorkspaceRecord>(keys)).filter(
      (r): r is WorkspaceRecord => r !== null && statuses.includes(r.status),
    )
  }

  /** 404 unless it exists (for ownership checks of sub-resources). */
  async assert(owner: string, id: string): Promise<void> {
    if (!(await this.records.find(owner, id))) throw notFound('workspace', id)
  }
}
