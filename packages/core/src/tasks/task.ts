/** A task: the stored record and how it reads, its states and the moves between them (one write, one publish each), and how it ends. */
import {
  ACTIVE_TASK_STATUSES,
  isApiError,
  Task,
  TaskError,
  type TaskWaiting,
  type TaskResult,
  type TaskStatus,
  type RunnerEvent,
} from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import { secondsSince, type Metrics } from '../ports/metrics.js'
import type { Store } from '../ports/store.js'
import type { OwnedRecord, OwnedCollection } from '../records/collection.js'
import { toView } from '../records/view.js'
import type { EventLog } from '../workspaces/event-log.js'
import type { EventBus } from './event-bus.js'

/** A stored task. */
export interface TaskRecord extends OwnedRecord {
  mode: 'batch' | 'session'
  profile_id: string
  prompt: string
  priority: 'low' | 'normal' | 'high'
  workspace_id: string
  /** The workspace's session id (reported for session mode only). */
  session_id: string
  allowed_tools: string[] | null
  max_turns: number | null
  /** Wall time the run may take once running, in seconds (null: none); absent on older records. */
  max_duration_s?: number | null
  max_budget_usd: number | null
  status: TaskStatus
  started_at: string | null
  finished_at: string | null
  result: TaskResult | null
  error: TaskError | null
  /** Queued without a concurrency slot: waits in the queue until its profile has one free (playbook runs). */
  slot_pending?: boolean
  /** The task's events in its workspace's log: how many, and the first one's `seq` (kept when it ends). */
  event_count?: number
  first_seq?: number
  /** The Berth instance that took the task (null: waiting in the shared queue). */
  instance_id?: string | null
  /**
   * How many times an instance took the task from a queue or a restart's recovery claimed it
   * (internal): a queued task can be taken, lost and taken again by the same instance, and
   * each taking is taken over once ({@link lostClaimKey}).
   */
  takes?: number
  /** The submission's approval rules and timeout; absent or null: the profile's. */
  require_approval?: string[] | null
  approval_timeout_s?: number | null
  /** The JSON Schema the answer must satisfy (absent: free text only). */
  output_schema?: Record<string, unknown>
  /** Permission requests waiting for a decision (absent on records from before approvals: 0). */
  pending_approvals?: number
  /** Why the queued task has not started (a caller cap, a full pool, the memory budget); shown while queued. */
  waiting?: TaskWaiting | null
  /**
   * The task's trace context, a W3C `traceparent` (internal, never in the view): the submit's
   * span, then the run's once it starts, so every instance continues one trace per task.
   */
  trace?: string | undefined
  /**
   * Who counts the run's model calls (internal, set when it starts running): the credential
   * broker's model `gateway`, or its `runner` (provider `stub`, or no broker). Absent on
   * records from before it: the gateway when it metered any call, else the runner.
   */
  metered_by?: 'gateway' | 'runner'
  /** When its session was rewound to an earlier task (absent: never). */
  rewound_at?: string
}

/** The statuses of a task not yet ended (the contract's list, typed for `includes(status)`). */
export const ACTIVE: readonly TaskStatus[] = ACTIVE_TASK_STATUSES

/** The runner's last line: how the run ended. */
export type ResultEvent = Extract<RunnerEvent, { type: 'result' }>

/** How a task ends. */
export interface TaskEnd {
  status: 'completed' | 'failed' | 'cancelled'
  result?: TaskResult | null
  error?: TaskError | null
}

/**
 * The store key that lists a task as not yet ended (read by restart recovery).
 *
 * @example
 * ```ts
 * await store.set(activeKey(task.id), { owner: task.owner_id })
 * ```
 */
export function activeKey(taskId: string): string {
  return `active-tasks:${taskId}`
}

/**
 * A task as the API shows it.
 *
 * @example
 * ```ts
 * taskView(record).session_id // null for a batch task
 * ```
 */
export function taskView(r: TaskRecord): Task {
  return toView(Task, r, {
    task_id: r.id,
    session_id: r.mode === 'session' ? r.session_id : null,
    pending_approvals: r.pending_approvals ?? 0,
    waiting: r.status === 'queued' ? (r.waiting ?? null) : null,
    rewound_at: r.rewound_at ?? null,
  })
}

/** Runner outcomes that end a task other than completed, and the error code each becomes. */
const OUTCOME_ERROR: Record<Exclude<ResultEvent['outcome'], 'success'>, TaskError['code']> = {
  error_max_turns: 'TURN_LIMIT_EXCEEDED',
  error_max_budget_usd: 'BUDGET_EXCEEDED',
  model_error: 'MODEL_ERROR',
  error_during_execution: 'CONTAINER_FAILED',
  interrupted: 'INTERRUPTED',
  error_output_invalid: 'OUTPUT_INVALID',
}

/** The end of a task a caller interrupted before its runner could answer (queued, starting). */
export const INTERRUPTED_END: TaskEnd = {
  status: 'cancelled',
  error: { code: 'INTERRUPTED', error: 'Interrupted by the caller before the agent ran' },
}

/**
 * How a runner result ends its task: completed; `cancelled` with INTERRUPTED when a caller
 * interrupted it; or failed with the outcome's code. The partial result is kept in each case.
 *
 * @example
 * ```ts
 * endOf({ ...result, outcome: 'error_max_turns' }).error?.code // 'TURN_LIMIT_EXCEEDED'
 * endOf({ ...result, outcome: 'interrupted' }).status          // 'cancelled'
 * ```
 */
export function endOf(result: ResultEvent): TaskEnd & { result: TaskResult } {
  const taskResult: TaskResult = {
    text: result.text,
    tool_calls: result.tool_calls,
    input_tokens: result.input_tokens,
    output_tokens: result.output_tokens,
    cost_usd: result.cost_usd,
    turns: result.turns,
  }
  if (result.structured_output !== undefined) taskResult.structured_output = result.structured_output
  if (result.outcome === 'success') return { status: 'completed', result: taskResult }
  const error = diskFull(result.error ?? undefined) ?? {
    code: OUTCOME_ERROR[result.outcome],
    error: result.error ?? result.outcome,
  }
  return { status: result.outcome === 'interrupted' ? 'cancelled' : 'failed', result: taskResult, error }
}

/** The codes a failed task may carry: the schema's own list. */
const TASK_ERROR_CODES: readonly string[] = TaskError.entries.code.options

/**
 * The error a run that threw ends with: an API error keeps its code when a task may carry it.
 *
 * @example
 * ```ts
 * errorOf(new ApiError('MODEL_ERROR', 'gone')) // { code: 'MODEL_ERROR', error: 'gone' }
 * errorOf(new Error('boom'))                   // { code: 'INTERNAL_ERROR', error: 'Internal error while running the task' }
 * ```
 */
export function errorOf(err: unknown): TaskError {
  if (isApiError(err) && err.code === 'CONTAINER_FAILED') {
    const full = diskFull(`${err.message} ${String(err.details?.stderr_tail ?? '')}`)
    if (full) return full
  }
  const code =
    isApiError(err) && TASK_ERROR_CODES.includes(err.code) ? (err.code as TaskError['code']) : 'INTERNAL_ERROR'
  return { code, error: isApiError(err) ? err.message : 'Internal error while running the task' }
}

/** How many events a task has, and its first `seq` (stored on the record as `event_count` and `first_seq` when it ends). */
export interface EventCount {
  count: number
  first: number
}

/**
 * The moves a task may make, from each status. A queued task starts, or ends without
 * running (cancelled, or failed when its instance was lost); a started one runs or ends;
 * an ended one never moves again. A new state (an approval to wait for) is one more row
 * here and the moves into and out of it.
 */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  queued: ['starting', 'failed', 'cancelled'],
  starting: ['running', 'failed', 'cancelled'],
  running: ['completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
}

/**
 * Whether a task in status `from` may move to `to`.
 *
 * @example
 * ```ts
 * canMove('queued', 'starting')  // true
 * canMove('completed', 'failed') // false: an ended task stays ended
 * ```
 */
export function canMove(from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to)
}

/** Whether a status is an end (no move leaves it). */
export function isEnded(status: TaskStatus): boolean {
  return TRANSITIONS[status].length === 0
}

export interface TaskStatesOptions {
  records: OwnedCollection<TaskRecord>
  store: Store
  clock: Clock
  bus: EventBus
  eventLog: EventLog
  /** The transcript's live counts (`Transcript`, which reads this file: the part of it an end needs). */
  events: { count(taskId: string): EventCount | undefined; forget(taskId: string): void }
  /** Where each end is counted (default none). */
  metrics?: Metrics
}

/**
 * Applies a task's moves: each one is checked against {@link TRANSITIONS}, written once and
 * published once as `task.status`. A move the table refuses writes and publishes nothing
 * and answers the task as it was.
 *
 * @example
 * ```ts
 * await states.open(task) // queued
 * task = await states.move(task, 'starting')
 * task = await states.move(task, 'running', { started_at: now })
 * await states.finish(task, { status: 'completed', result })
 * ```
 */
export class TaskStates {
  constructor(private readonly o: TaskStatesOptions) {}

  /** A new task, `queued`: stored, listed as active (restart recovery reads that list), published. */
  async open(t: TaskRecord): Promise<void> {
    await this.o.records.put(t)
    await this.o.store.set(activeKey(t.id), { owner: t.owner_id })
    this.o.bus.publish({
      type: 'task.status',
      task_id: t.id,
      status: t.status,
      task: taskView(t),
      owner_id: t.owner_id,
    })
  }

  /**
   * Move `t` to `status` with `fields`, from the copy the caller holds: the caller is the
   * one part that changes its task's status while it runs, so no read is needed. An end
   * reads the stored copy once: another instance that took the task over for lost may have
   * ended it already, and an ended task stays ended.
   */
  async move(t: TaskRecord, status: TaskStatus, fields: Partial<TaskRecord> = {}): Promise<TaskRecord> {
    let current = t
    if (isEnded(status)) current = (await this.o.records.find(t.owner_id, t.id)) ?? t
    if (!canMove(current.status, status)) return current
    const next = { ...current, ...fields, status, updated_at: isoNow(this.o.clock) }
    await this.o.records.put(next)
    this.o.bus.publish({ type: 'task.status', task_id: t.id, status, task: taskView(next), owner_id: t.owner_id })
    return next
  }

  /**
   * Change fields of a task under way without a move (its count of pending approvals),
   * written and published as a `task.status` with the same status. A task that ended
   * meanwhile (read once) is left as it is.
   */
  async update(t: TaskRecord, fields: Partial<TaskRecord>): Promise<TaskRecord> {
    const current = (await this.o.records.find(t.owner_id, t.id)) ?? t
    if (isEnded(current.status)) return current
    const next = { ...t, ...fields, updated_at: isoNow(this.o.clock) }
    await this.o.records.put(next)
    this.o.bus.publish({
      type: 'task.status',
      task_id: t.id,
      status: next.status,
      task: taskView(next),
      owner_id: t.owner_id,
    })
    return next
  }

  /**
   * Record why a queued task waits, on the stored copy: left alone once the task moved,
   * ended or went to another instance (a stale copy never overwrites those).
   */
  async markWaiting(t: TaskRecord, waiting: TaskWaiting): Promise<void> {
    const current = await this.o.records.find(t.owner_id, t.id)
    if (current?.status !== 'queued' || current.instance_id !== t.instance_id) return
    const next = { ...current, waiting, updated_at: isoNow(this.o.clock) }
    await this.o.records.put(next)
    this.o.bus.publish({
      type: 'task.status',
      task_id: t.id,
      status: 'queued',
      task: taskView(next),
      owner_id: t.owner_id,
    })
  }

  /** End a task: its events flushed, its end and event count stored, no longer recovered. */
  async finish(t: TaskRecord, end: TaskEnd): Promise<TaskRecord> {
    // Events first: a task stored as ended is never recovered again, so a crash between its
    // end and a later flush would lose the events its subscribers already saw.
    await this.o.eventLog.flush(t.owner_id, t.workspace_id)
    const counted = this.o.events.count(t.id)
    const fields: Partial<TaskRecord> = {
      finished_at: isoNow(this.o.clock),
      result: end.result ?? null,
      error: end.error ?? null,
      // Requests still open when a task ends are cancelled with it.
      pending_approvals: 0,
      event_count: counted?.count ?? t.event_count ?? 0,
    }
    if (counted) fields.first_seq = counted.first
    const done = await this.move(t, end.status, fields)
    // Counted by the move that ended it here: an end another instance stored first is theirs.
    if (done.finished_at === fields.finished_at && done.status === end.status)
      this.o.metrics?.taskEnded({
        mode: t.mode,
        status: end.status,
        code: end.error?.code ?? null,
        seconds: secondsSince(t.created_at, this.o.clock.now()),
      })
    this.o.events.forget(t.id)
    await this.o.store.remove(activeKey(t.id))
    return done
  }
}

/**
 * DISK_LIMIT_EXCEEDED when a runner's failure says its filesystem was full (the workspace or
 * `/tmp` at its size): the agent's own tools saw ENOSPC as a tool error first; this is
 * when the runner itself could not go on.
 */
function diskFull(text: string | undefined): TaskError | null {
  if (!text || !/\bENOSPC\b|no space left on device/i.test(text)) return null
  return {
    code: 'DISK_LIMIT_EXCEEDED',
    error: "The task's disk is full: its workspace or /tmp reached the size its environment allows (limits.disk_mb)",
  }
}
