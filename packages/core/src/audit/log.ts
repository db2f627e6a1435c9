/** The audit log: an append-only record of security-relevant actions, kept for a set time. */
import { createHash } from 'node:crypto'
import {
  AuditEntry,
  isApiError,
  newId,
  validationError,
  type AuditAction,
  type AuditActor,
  type AuditQuery,
  type AuditTarget,
} from '@berth/contract'
import type { Caller } from '../caller.js'
import type { Coordination } from '../coordination/port.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { offsetOf, pageFrom, type Page, type Paged } from '../records/collection.js'
import { indexEntryFor, listOrder, term } from '../records/indexes.js'
import { toView } from '../records/view.js'
import { currentRequest } from './context.js'
import { MinuteCounts, type AuditDetails, type PendingCount } from './counted.js'
import { deniedCount, egressCount, failedAuthCount, type EgressRefusal } from './refusals.js'

export type { AuditDetails } from './counted.js'
export type { EgressRefusal } from './refusals.js'

/** One action to record; the actor, request id and source come from the request being served. */
export interface AuditInput {
  action: AuditAction
  target: AuditTarget
  /** The user the action concerns besides the actor (a user an admin made, the owner of a removed container): it sees the entry too. */
  owner?: string | undefined
  /** Default `success`. */
  outcome?: 'success' | 'failure'
  details?: AuditDetails | undefined
  /** Who acted when no caller is known (an OAuth callback, a WebSocket message); default `system`. */
  actor?: AuditActor
}

/** A stored entry: the entry, the time it is indexed by and the owners holding a copy. */
interface AuditRecord extends AuditEntry {
  created_at: string
  owners: string[]
}

export interface AuditLogOptions {
  store: Store
  clock: Clock
  logger: Logger
  coordination: Coordination
  /** How long entries are kept (default 365 days). */
  retentionDays?: number
}

const DAY_MS = 24 * 60 * 60 * 1000
/** How often counted refusals are written, and how often old entries are swept. */
const FLUSH_MS = 5_000
const SWEEP_MS = 60 * 60 * 1000
/** Entries removed per sweep at most (the next sweep goes on). */
const SWEEP_MAX = 20_000
const SWEEP_BATCH = 200

/** The deterministic id of a counted entry in one minute (an address's failures, ...), so every instance adds to one entry. */
function countedId(minute: number, key: string): string {
  const hash = BigInt(`0x${createHash('sha256').update(key).digest('hex').slice(0, 16)}`)
  return `aud_${minute.toString(36).padStart(9, '0').slice(-9)}00${hash.toString(36).padStart(9, '0').slice(-9)}`
}

/** Latest instant whose ISO form still compares as text (year 9999). */
const MAX_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

/** A query timestamp as the entries' ISO form, clamped to 1970–9999 so that text order is time order. */
function instant(timestamp: string, field: 'from' | 'to'): string {
  const ms = Date.parse(timestamp)
  if (Number.isNaN(ms)) throw validationError([{ location: 'query', path: field, message: 'must be a timestamp' }])
  return new Date(Math.min(Math.max(ms, 0), MAX_TIME)).toISOString()
}

/** The first index in `[0, total)` whose entry meets `pred` (which holds from some index on), by bisection. */
async function firstWhere(
  read: (offset: number) => Promise<AuditRecord | undefined>,
  total: number,
  pred: (r: AuditRecord) => boolean,
): Promise<number> {
  let lo = 0
  let hi = total
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    const r = await read(mid)
    if (!r || pred(r)) hi = mid
    else lo = mid + 1
  }
  return lo
}

/**
 * The audit log. Each entry is stored once for the deployment (`audit:<id>`, listed by
 * admins) and once per user it concerns (`audit-own:<user>:<id>`), indexed by time with
 * the actor, action and target as filter terms; a time range is found by bisection of the
 * ordered index (O(log n) one-entry reads besides the page). Entries older than the retention are
 * swept hourly (by one instance). Refusals (failed authentication per address, ids a caller
 * does not have per caller and kind, egress refused per task, host and reason) are counted
 * per minute and written every few seconds, into one entry per key and minute across instances.
 *
 * @example
 * ```ts
 * const audit = new AuditLog({ store, clock, logger, coordination })
 * await audit.record({ action: 'secret.created', target: { type: 'secret', id: 'sec_1' } })
 * const { items } = await audit.list('usr_1', { page: 1, limit: 20 })
 * ```
 */
export class AuditLog {
  private readonly counts: MinuteCounts
  private readonly retentionMs: number
  private timers: ReturnType<typeof setInterval>[] = []

  constructor(private readonly o: AuditLogOptions) {
    this.retentionMs = (o.retentionDays ?? 365) * DAY_MS
    this.counts = new MinuteCounts(o.clock, (p) => this.addCount(p))
  }

  /**
   * Record an action. A failure to store it is logged, never thrown: the action has
   * happened, and its caller must hear so.
   */
  async record(input: AuditInput): Promise<void> {
    const scope = currentRequest()
    const caller = scope?.caller
    const actor: AuditActor = caller
      ? { type: caller.role, id: caller.id }
      : (input.actor ?? { type: 'system', id: null })
    const at = isoNow(this.o.clock)
    const owners = [...new Set([actor.type === 'user' || actor.type === 'admin' ? actor.id : null, input.owner])]
    const record: AuditRecord = {
      id: newId('audit'),
      at,
      created_at: at,
      actor,
      action: input.action,
      target: input.target,
      outcome: input.outcome ?? 'success',
      request_id: scope?.request_id ?? null,
      source: scope?.source ?? null,
      ...(input.details && { details: input.details }),
      owners: owners.filter((o): o is string => typeof o === 'string'),
    }
    try {
      await this.write(`audit:${record.id}`, record)
      for (const owner of record.owners) await this.write(`audit-own:${owner}:${record.id}`, record)
    } catch (err) {
      this.o.logger.error('audit entry could not be stored', { action: input.action, error: String(err) })
    }
  }

  /**
   * Run a decision and record it: `input` when `act` resolves (with what `after` adds from
   * its answer), or `input` with outcome `failure` when it throws a 409 CONFLICT (a decision
   * another caller or instance took first, a state that refuses it). Other errors leave no
   * entry here: nothing changed (a 404 is counted by {@link denied}).
   */
  async attempt<T>(
    input: AuditInput,
    act: () => T | Promise<T>,
    after?: (answer: T) => Partial<AuditInput>,
  ): Promise<T> {
    let answer: T
    try {
      answer = await act()
    } catch (err) {
      if (isApiError(err) && err.code === 'CONFLICT')
        await this.record({ ...input, outcome: 'failure', details: { ...input.details, error: err.message } })
      throw err
    }
    const more = after?.(answer)
    const details = { ...input.details, ...more?.details }
    await this.record({ ...input, ...more, details: Object.keys(details).length ? details : undefined })
    return answer
  }

  /** Count a request that failed authentication from `address` (written with the others of its minute). */
  authFailed(address: string | null): void {
    this.counts.note(...failedAuthCount(address ?? 'unknown', currentRequest()?.request_id ?? null))
  }

  /**
   * Count `err` when it is the 404 of a resource id `caller` asked for and does not have
   * (another caller's, or none at all: Berth cannot tell them apart without a read per
   * user), answered by `where` (a route's name, or `ws.<message type>`). One entry per caller,
   * kind, `where` and minute, with the first id asked for and a `count`.
   */
  denied(caller: Caller, where: string, err: unknown): void {
    if (!isApiError(err) || err.code !== 'NOT_FOUND' || !err.resource) return
    const scope = currentRequest()
    this.counts.note(...deniedCount(caller, where, err.resource, scope?.request_id ?? null, scope?.source ?? null))
  }

  /** Count a request of a task's agent the egress proxy refused (one entry per task, host, reason and minute; a task's hosts beyond 20 a minute as `*`). */
  egressRefused(refusal: EgressRefusal): void {
    this.counts.note(...egressCount(refusal))
  }

  /** Write the refusals counted so far (also done every few seconds and on close). */
  flush(): Promise<void> {
    return this.counts.flush()
  }

  /**
   * One page of the log, newest first: the deployment's (`owner` null) or one user's.
   * Filters are index terms; `from`/`to` (inclusive) bound the page by bisection.
   */
  async list(owner: string | null, q: Omit<AuditQuery, 'page' | 'cursor'> & Page): Promise<Paged<AuditEntry>> {
    const from = q.from && instant(q.from, 'from')
    const to = q.to && instant(q.to, 'to')
    if (from && to && from > to)
      throw validationError([{ location: 'query', path: 'from', message: 'must not be after `to`' }])
    const scope = owner === null ? 'audit' : `audit-own:${owner}`
    const filter = term({ actor: q.actor, action: q.action, target: q.target })
    const read = (offset: number, limit: number, after?: string) =>
      this.o.store.list<AuditRecord>(scope, { term: filter, offset, limit, after })
    const one = async (offset: number) => (await read(offset, 1)).items[0]
    const { total } = await read(0, 1)
    const first = to ? await firstWhere(one, total, (r) => r.at <= to) : 0
    const end = from ? await firstWhere(one, total, (r) => r.at < from) : total
    // A user sees what an admin did to it, not the admin's address.
    const view = (r: AuditRecord) =>
      toView(AuditEntry, r, owner !== null && r.actor.id !== owner ? { source: null } : undefined)
    const orderOf = (r: AuditRecord) => listOrder('audit', r)
    let got: AuditRecord[]
    if (q.after !== undefined) {
      // A cursor of this list (same filters) is already below `to`: read on from it, up to `from`.
      got = (await read(0, q.limit + 1, q.after)).items.filter((r) => !from || r.at >= from)
    } else {
      const offset = first + offsetOf(q)
      const count = Math.min(q.limit + 1, end - offset)
      got = count > 0 ? (await read(offset, count)).items : []
    }
    const page = pageFrom(got, q.limit, Math.max(0, end - first), orderOf)
    return { ...page, items: page.items.map(view) }
  }

  /** Remove the entries older than the retention, oldest first; returns how many went. */
  async sweep(): Promise<number> {
    const cutoff = new Date(this.o.clock.now() - this.retentionMs).toISOString()
    let removed = 0
    while (removed < SWEEP_MAX) {
      const { total } = await this.o.store.list('audit', { offset: 0, limit: 1 })
      if (total === 0) break
      const { items } = await this.o.store.list<AuditRecord>('audit', {
        offset: Math.max(0, total - SWEEP_BATCH),
        limit: SWEEP_BATCH,
      })
      const old = items.filter((r) => r.at < cutoff)
      for (const r of old) {
        for (const owner of r.owners) await this.o.store.remove(`audit-own:${owner}:${r.id}`)
        await this.o.store.remove(`audit:${r.id}`)
      }
      removed += old.length
      if (old.length < items.length || old.length === 0) break
    }
    return removed
  }

  /** Start writing failed authentications and sweeping (one instance an hour) in the background. */
  start(): void {
    if (this.timers.length) return
    const sweep = async () => {
      const hour = Math.floor(this.o.clock.now() / SWEEP_MS)
      if (!(await this.o.coordination.once.claimOnce(`audit-sweep:${hour}`, SWEEP_MS))) return
      const removed = await this.sweep()
      if (removed) this.o.logger.info('audit: old entries swept', { removed })
    }
    const guard = (what: string, job: () => Promise<void>) => () =>
      void job().catch((err: unknown) => this.o.logger.warn(`audit: ${what} failed`, { error: String(err) }))
    this.timers = [
      setInterval(
        guard('flush', () => this.flush()),
        FLUSH_MS,
      ),
      setInterval(guard('sweep', sweep), SWEEP_MS),
    ]
    for (const t of this.timers) t.unref()
    guard('sweep', sweep)()
  }

  /** Stop the background work and write what is counted. */
  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t)
    this.timers = []
    await this.flush().catch(() => {})
  }

  private async write(key: string, record: AuditRecord): Promise<void> {
    await this.o.store.put(key, record, indexEntryFor(key, record)!)
  }

  /** Add a key's refusals of a minute to its entry, holding the entry's lock across instances. */
  private async addCount(p: PendingCount): Promise<boolean> {
    const id = countedId(p.minute, p.key)
    const { slots, instanceId } = this.o.coordination
    const lease = await slots.acquire(`audit-counts:${id}`, 1, instanceId, 30_000)
    if (!lease) return false
    try {
      const key = `audit:${id}`
      const old = await this.o.store.get<AuditRecord>(key)
      const at = new Date(p.minute).toISOString()
      const { entry } = p
      const record: AuditRecord = {
        id,
        at,
        created_at: at,
        actor: entry.actor,
        action: entry.action,
        target: entry.target,
        outcome: 'failure',
        request_id: old?.request_id ?? entry.request_id,
        source: old?.source ?? entry.source,
        details: { ...(old?.details ?? entry.details), count: Number(old?.details?.count ?? 0) + p.count },
        owners: entry.owners,
      }
      await this.write(key, record)
      for (const owner of record.owners) await this.write(`audit-own:${owner}:${id}`, record)
      return true
    } finally {
      await slots.release(lease)
    }
  }
}
