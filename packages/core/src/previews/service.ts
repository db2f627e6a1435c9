/** Preview links: create, list and revoke them (owner only), and find where a token leads. */
import { randomBytes } from 'node:crypto'
import {
  ApiError,
  type CreatePreview,
  newId,
  notFound,
  Preview,
  PreviewSummary,
  validationError,
} from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { PortTarget } from '../ports/container-runtime.js'
import type { Coordination } from '../coordination/port.js'
import { OwnedCollection } from '../records/collection.js'
import { term } from '../records/indexes.js'
import { toView } from '../records/view.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import { InstanceUrls } from './instance-urls.js'
import { hashToken, TOKEN_SHAPE, tokenKey, type PreviewRecord, type TokenPointer } from './records.js'

/** A link's lifetime: the default when `ttl_s` is omitted, and the most a caller may ask for (seconds). */
export interface PreviewTtl {
  defaultS: number
  maxS: number
}

/** Where a preview request goes: a port this host reaches, the holder instance's URL, or nowhere right now. */
export type PreviewRoute =
  | { kind: 'here'; target: PortTarget }
  | { kind: 'forward'; url: string }
  | { kind: 'unavailable'; message: string }

export interface PreviewsOptions {
  store: Store
  clock: Clock
  workspaces: WorkspacesService
  engine: TaskEngine | undefined
  coordination: Coordination
  ttl?: PreviewTtl | undefined
  /** This instance's URL for the others (`BERTH_INSTANCE_URL`); without it, requests for its containers cannot be forwarded here. */
  instanceUrl?: string | undefined
}

/** One hour by default, one day at most. */
export const DEFAULT_PREVIEW_TTL: PreviewTtl = { defaultS: 3_600, maxS: 86_400 }

/**
 * Preview links to a port inside a session's container. Only the workspace's owner
 * creates, lists and revokes them; the token is 256 random bits, kept as its hash;
 * an expired or revoked token resolves like one that never existed.
 *
 * @example
 * ```ts
 * const p = await previews.create('usr_1', 'ws_1', { port: 8000 }, 'https://berth.example')
 * await previews.route(p.url.split('/')[4]!) // { kind: 'here', target: { host: '172.18.0.3', port: 8000 } }
 * ```
 */
export class PreviewsService {
  readonly records: OwnedCollection<PreviewRecord>
  readonly instanceUrls: InstanceUrls
  private readonly ttl: PreviewTtl

  constructor(private readonly o: PreviewsOptions) {
    this.records = new OwnedCollection<PreviewRecord>(o.store, 'previews', 'preview')
    this.instanceUrls = new InstanceUrls(o.store)
    this.ttl = o.ttl ?? DEFAULT_PREVIEW_TTL
  }

  /** Advertise this instance's URL, when it has one. */
  async start(): Promise<void> {
    if (this.o.instanceUrl) await this.instanceUrls.register(this.o.coordination.instanceId, this.o.instanceUrl)
  }

  /** A new link to `input.port` of the workspace's warm session container; `baseUrl` is Berth's public URL. */
  async create(owner: string, wsId: string, input: CreatePreview, baseUrl: string): Promise<Preview> {
    const ws = await this.o.workspaces.records.get(owner, wsId)
    const ttlS = input.ttl_s ?? this.ttl.defaultS
    if (ttlS > this.ttl.maxS)
      throw validationError([{ location: 'body', path: 'ttl_s', message: `must be at most ${this.ttl.maxS} seconds` }])
    this.assertWarmSession(ws)
    const token = randomBytes(32).toString('base64url')
    const now = this.o.clock.now()
    const record: PreviewRecord = {
      id: newId('preview'),
      owner_id: owner,
      workspace_id: ws.id,
      port: input.port,
      expires_at: new Date(now + ttlS * 1000).toISOString(),
      token_hash: hashToken(token),
      created_at: isoNow(this.o.clock),
      updated_at: isoNow(this.o.clock),
    }
    // The pointer first: a record without one is unreachable, a pointer without a record resolves to nothing.
    await this.o.store.set<TokenPointer>(tokenKey(record.token_hash), { owner_id: owner, id: record.id })
    await this.records.put(record)
    return toView(Preview, { ...record, url: `${baseUrl.replace(/\/+$/, '')}/preview/${token}/` })
  }

  /** The workspace's live links, newest first (expired ones are dropped as they are met). */
  async list(owner: string, wsId: string): Promise<{ previews: PreviewSummary[]; total: number; next_cursor: null }> {
    await this.o.workspaces.records.get(owner, wsId)
    const page = { page: 1, limit: 1000 }
    const { items } = await this.records.list(owner, page, term({ workspace: wsId }))
    const live: PreviewRecord[] = []
    for (const r of items) this.expired(r) ? await this.drop(r) : live.push(r)
    // Not paged: every live link in one answer (a workspace holds few).
    return { previews: live.map((r) => toView(PreviewSummary, r)), total: live.length, next_cursor: null }
  }

  /** Revoke a link: its URL answers 404 from now on. Another caller's, or one already gone, is 404. */
  async revoke(owner: string, wsId: string, previewId: string): Promise<void> {
    const r = await this.records.find(owner, previewId)
    if (!r || r.workspace_id !== wsId) throw notFound('preview', previewId)
    await this.drop(r)
  }

  /** The live preview a token opens, or `null` (unknown, revoked, expired and of a deleted workspace alike). */
  async find(token: string): Promise<PreviewRecord | null> {
    if (!TOKEN_SHAPE.test(token)) return null
    const hash = hashToken(token)
    const pointer = await this.o.store.get<TokenPointer>(tokenKey(hash))
    const r = pointer && (await this.records.find(pointer.owner_id, pointer.id))
    if (!r || r.token_hash !== hash) return null
    // A deleted workspace takes its links with it.
    const ws = await this.o.workspaces.records.find(r.owner_id, r.workspace_id)
    if (ws && !this.expired(r)) return r
    await this.drop(r)
    return null
  }

  /**
   * Where a live preview's traffic goes: computed from the record and the workspace alone,
   * never from the request. On the instance holding the container, its port's address;
   * on another, the holder's advertised URL.
   */
  async route(r: PreviewRecord): Promise<PreviewRoute> {
    const ws = await this.o.workspaces.records.find(r.owner_id, r.workspace_id)
    if (!ws?.container_id) return unavailable("The session's container is not running: run a task in the session")
    const me = this.o.coordination.instanceId
    if (ws.instance_id && ws.instance_id !== me) {
      const alive = await this.o.coordination.instances.alive()
      const url = alive.includes(ws.instance_id) ? await this.instanceUrls.of(ws.instance_id) : null
      return url
        ? { kind: 'forward', url }
        : unavailable(`The instance holding the session's container (${ws.instance_id}) cannot be reached`)
    }
    const c = this.o.engine?.pool.list().find((x) => x.id === ws.container_id)
    const runtime = this.o.engine?.runtime
    if (!c || !runtime || c.workspace_id !== ws.id || c.purpose !== 'session')
      return unavailable("The session's container is not running: run a task in the session")
    if (!runtime.portTarget) return unavailable(`The ${runtime.name} runtime serves no previews`)
    const target = await runtime.portTarget(c.engine_id, r.port)
    return target
      ? { kind: 'here', target }
      : unavailable(`Nothing in the session's container can be reached on port ${r.port}`)
  }

  /** 409 unless the workspace's session container is warm; 400 for a batch task's container. */
  private assertWarmSession(ws: WorkspaceRecord): void {
    if (!ws.container_id || ws.status !== 'running')
      throw new ApiError(
        'CONFLICT',
        `Workspace ${ws.id} has no warm container: run a task in its session, then open the preview while the session is warm`,
      )
    // Known exactly on the instance holding the container; elsewhere the proxy serves only session containers.
    const c = this.o.engine?.pool.list().find((x) => x.id === ws.container_id)
    if (c && c.purpose !== 'session')
      throw validationError([
        { location: 'params', path: 'id', message: "a batch task's workspace has no session container to preview" },
      ])
  }

  private expired(r: PreviewRecord): boolean {
    return Date.parse(r.expires_at) <= this.o.clock.now()
  }

  private async drop(r: PreviewRecord): Promise<void> {
    await this.o.store.remove(tokenKey(r.token_hash))
    await this.o.store.remove(`previews:${r.owner_id}:${r.id}`)
  }
}

const unavailable = (message: string): PreviewRoute => ({ kind: 'unavailable', message })
