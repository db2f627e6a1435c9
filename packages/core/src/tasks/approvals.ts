/** Permission requests of running tasks: stored per owner, listed by task, decided once, closed by the runner or the task's end. */
import { Approval, ApiError, idPattern, notFound, type DecideApproval, type RunnerEvent } from '@berth/contract'
import type { OnceKeys } from '../coordination/port.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord } from '../records/collection.js'
import { term } from '../records/indexes.js'
import { toView } from '../records/view.js'
import type { TaskRecord } from './task.js'

/** A stored permission request (its id is the runner's `request_id`). */
export interface ApprovalRecord extends OwnedRecord {
  task_id: string
  tool: string
  /** The agent's input, or the one an `allow` replaced it with (which ran). */
  input: unknown
  /** The agent's input, when an `allow` replaced it. */
  original_input?: unknown
  status: Approval['status']
  expires_at: string
  decided_at: string | null
  message: string | null
}

type PermissionRequest = Extract<RunnerEvent, { type: 'permission_request' }>
type PermissionDecision = Extract<RunnerEvent, { type: 'permission_decision' }>

const APPROVAL_ID = idPattern('approval')

/** How long a decision's claim outlives the request's timeout (a late duplicate still meets it). */
const CLAIM_MARGIN_MS = 60 * 60 * 1000

/**
 * Permission requests: one record per `permission_request` a runner writes (owner-scoped,
 * so another caller's request is a 404 like an unknown one), decided at most once across
 * every instance (a single-use key of the coordination port), and closed by the runner's
 * `permission_decision` (a timeout marks it `expired`) or by its task's end (`cancelled`).
 *
 * @example
 * ```ts
 * const approvals = new Approvals({ store, clock, once: coordination.once })
 * await approvals.open(task, event, 900)
 * const decided = await approvals.claim(owner, task.id, event.request_id, { decision: 'allow' })
 * ```
 */
export class Approvals {
  readonly records: OwnedCollection<ApprovalRecord>

  constructor(private readonly o: { store: Store; clock: Clock; once: OnceKeys }) {
    this.records = new OwnedCollection<ApprovalRecord>(o.store, 'approvals', 'approval request')
  }

  view(r: ApprovalRecord): Approval {
    return toView(Approval, r, { request_id: r.id })
  }

  /**
   * Store a runner's request, waiting until `timeoutS` from now. A request whose id is not
   * an approval id (`apr_…`) is not stored (null): no one can decide it, and the runner
   * denies it at its timeout.
   */
  async open(task: TaskRecord, event: PermissionRequest, timeoutS: number): Promise<ApprovalRecord | null> {
    if (!APPROVAL_ID.test(event.request_id)) return null
    const now = this.o.clock.now()
    const at = isoNow(this.o.clock)
    return this.records.put({
      id: event.request_id,
      owner_id: task.owner_id,
      task_id: task.id,
      tool: event.tool,
      input: event.input,
      status: 'pending',
      created_at: at,
      updated_at: at,
      expires_at: new Date(now + timeoutS * 1000).toISOString(),
      decided_at: null,
      message: null,
    })
  }

  /** A task's requests still waiting for a decision, oldest first. */
  async pending(owner: string, taskId: string): Promise<Approval[]> {
    const { items } = await this.records.list(
      owner,
      { page: 1, limit: 1000 },
      term({ task_id: taskId, status: 'pending' }),
    )
    return items.reverse().map((r) => this.view(r))
  }

  /**
   * Decide a request once: 404 when it is unknown, another caller's or another task's; 409
   * CONFLICT when it was decided already (here or on another instance), has expired, or
   * its task ended. The stored request says the decision from then on: an `allow` with an
   * `input` stores that input (what runs) and the agent's as `original_input`.
   */
  async claim(owner: string, taskId: string, requestId: string, body: DecideApproval): Promise<ApprovalRecord> {
    const r = await this.records.find(owner, requestId)
    if (!r || r.task_id !== taskId) throw notFound('approval request', requestId)
    const expiresAt = Date.parse(r.expires_at)
    if (r.status !== 'pending' || this.o.clock.now() >= expiresAt)
      throw new ApiError('CONFLICT', `Approval request ${requestId} is already ${settled(r, this.o.clock.now())}`)
    const ttl = Math.max(1000, expiresAt - this.o.clock.now()) + CLAIM_MARGIN_MS
    const earlier = await this.o.once.setIfAbsent(claimKey(requestId), body.decision, ttl)
    if (earlier !== null) throw new ApiError('CONFLICT', `Approval request ${requestId} is already decided`)
    const at = isoNow(this.o.clock)
    const replaced = body.decision === 'allow' && body.input !== undefined
    return this.records.put({
      ...r,
      ...(replaced && { input: body.input, original_input: r.input }),
      status: body.decision === 'allow' ? 'allowed' : 'denied',
      decided_at: at,
      updated_at: at,
      message: body.message ?? null,
    })
  }

  /**
   * The runner's `permission_decision`: a request denied at its timeout becomes `expired`
   * (and can no longer be decided); one a caller decided is already stored as such.
   */
  async closed(owner: string, event: PermissionDecision): Promise<void> {
    if (event.by !== 'timeout') return
    const r = await this.records.find(owner, event.request_id)
    if (!r) return
    // Whatever a caller sent too late, the runner denied it: the record says what happened.
    await this.o.once.setIfAbsent(claimKey(r.id), 'deny', CLAIM_MARGIN_MS).catch(() => null)
    const at = isoNow(this.o.clock)
    await this.records.put({ ...r, status: 'expired', decided_at: at, updated_at: at, message: event.message })
  }

  /** The task ended: its requests still pending become `cancelled` and can no longer be decided. */
  async cancelPending(task: TaskRecord): Promise<void> {
    const { items } = await this.records.list(
      task.owner_id,
      { page: 1, limit: 1000 },
      term({ task_id: task.id, status: 'pending' }),
    )
    const at = isoNow(this.o.clock)
    for (const r of items) await this.records.put({ ...r, status: 'cancelled', updated_at: at })
  }
}

/** The single-use key a decision of `requestId` takes. */
const claimKey = (requestId: string) => `approval-decision:${requestId}`

/** What a request that can no longer be decided is, for the 409's message. */
function settled(r: ApprovalRecord, now: number): string {
  if (r.status === 'pending' && now >= Date.parse(r.expires_at)) return 'expired'
  return r.status
}
