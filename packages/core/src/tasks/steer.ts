/** What callers do to a task under way: decide its permission requests, interrupt it, send it messages (here or on the instance running it). */
import { ApiError, notFound, type Approval, type DecideApproval, type RunnerControl, type Task } from '@berth/contract'
import type { AuditDetails, AuditLog } from '../audit/log.js'
import type { OnceKeys } from '../coordination/port.js'
import type { OwnedCollection } from '../records/collection.js'
import type { ApprovalRecord, Approvals } from './approvals.js'
import { REMOTE_CANCEL_WAIT_MS, type LocalCancel } from './cancel.js'
import type { Dispatcher } from './dispatch.js'
import type { Scheduler } from './scheduler.js'
import type { LocalSteer } from './steering.js'
import { ACTIVE, INTERRUPTED_END, taskView, type TaskRecord } from './task.js'

export interface TaskSteeringOptions {
  instanceId: string
  records: OwnedCollection<TaskRecord>
  approvals: Approvals
  local: LocalSteer
  cancels: Pick<LocalCancel, 'ended' | 'endOf'>
  scheduler: Pick<Scheduler, 'dequeue'>
  dispatch: Pick<Dispatcher, 'cancel' | 'requestControl'>
  /** Tells the first cancel or interrupt of a task from the later ones (for the audit log). */
  once: OnceKeys
  audit?: AuditLog | undefined
}

/** How long the first stop of a task is remembered: longer than a stop takes to end it. */
const STOP_CLAIM_MS = 60 * 60 * 1000
/** How much of a tool input an audit entry shows. */
const INPUT_SHOWN = 1000

/** A tool input as an audit entry shows it: its JSON, cut at {@link INPUT_SHOWN} characters. */
function shown(input: unknown): string {
  const text = JSON.stringify(input) ?? 'null'
  return text.length > INPUT_SHOWN ? `${text.slice(0, INPUT_SHOWN)}…` : text
}

/** What an approval's audit entry says of its decision: the tool, and the input that runs (and the agent's, when replaced). */
function decisionDetails(r: ApprovalRecord): AuditDetails {
  const details: AuditDetails = { tool: r.tool, input: shown(r.input) }
  if (r.original_input !== undefined) details.original_input = shown(r.original_input)
  return details
}

/**
 * Steering of a caller's task: the same calls serve the routes and the WebSocket. A control
 * for a task this instance runs goes to its runner's stdin; one for a task another
 * instance runs is relayed to it over the coordination port, as a cancel is.
 *
 * @example
 * ```ts
 * await tasks.steer.decide(owner, taskId, requestId, { decision: 'deny', message: 'Not on main' })
 * await tasks.steer.message(owner, taskId, 'Use pnpm, not npm')
 * await tasks.steer.interrupt(owner, taskId) // the task, ended `cancelled` with INTERRUPTED
 * ```
 */
export class TaskSteering {
  constructor(private readonly o: TaskSteeringOptions) {}

  /** The task's permission requests waiting for a decision (404 for another caller's task). */
  async approvals(owner: string, taskId: string): Promise<Approval[]> {
    const t = await this.o.records.get(owner, taskId)
    // A task that ended waits for nothing (one ended by a restart's recovery may have left some behind).
    if (!ACTIVE.includes(t.status)) return []
    return this.o.approvals.pending(owner, taskId)
  }

  /**
   * Decide a permission request once (409 the second time, 404 for an unknown or another
   * caller's one). Audited here, for every way a decision comes (HTTP, WebSocket, messenger):
   * the decision with the input that runs, or the 409 of one that came too late.
   */
  async decide(owner: string, taskId: string, requestId: string, body: DecideApproval): Promise<Approval> {
    const entry = {
      action: 'approval.decided' as const,
      target: { type: 'approval', id: requestId },
      details: { task_id: taskId, decision: body.decision },
      // Over the WebSocket or from the messenger no request is being served: the task's owner decided.
      actor: { type: 'user' as const, id: owner },
    }
    const decide = () => this.claim(owner, taskId, requestId, body)
    const decided = this.o.audit
      ? await this.o.audit.attempt(entry, decide, (r) => ({ details: decisionDetails(r) }))
      : await decide()
    return this.o.approvals.view(decided)
  }

  /** Claim the decision and hand it to the runner; the stored request as decided. */
  private async claim(owner: string, taskId: string, requestId: string, body: DecideApproval): Promise<ApprovalRecord> {
    const t = await this.o.records.get(owner, taskId)
    if (!ACTIVE.includes(t.status)) {
      // Unknown requests stay a 404 whatever the task's state.
      const r = await this.o.approvals.records.find(owner, requestId)
      if (!r || r.task_id !== taskId) throw notFound('approval request', requestId)
      throw new ApiError('CONFLICT', `Task ${taskId} has ended (${t.status}): its requests can no longer be decided`)
    }
    const decided = await this.o.approvals.claim(owner, taskId, requestId, body)
    const control: RunnerControl = { type: 'decision', request_id: requestId, decision: body.decision }
    if (body.message !== undefined) control.message = body.message
    if (body.input !== undefined && body.decision === 'allow') control.input = body.input
    await this.deliver(t, control)
    return decided
  }

  /**
   * Hand the running agent a message. Only a `running` task takes one: an ended task, or
   * one not started yet (queued, starting), answers 409 CONFLICT.
   */
  async message(owner: string, taskId: string, text: string): Promise<{ task_id: string; accepted: true }> {
    const t = await this.o.records.get(owner, taskId)
    if (!ACTIVE.includes(t.status)) throw new ApiError('CONFLICT', `Task ${taskId} has ended (${t.status})`)
    if (t.status !== 'running')
      throw new ApiError('CONFLICT', `Task ${taskId} is ${t.status}: send messages once it is running`)
    if (!(await this.deliver(t, { type: 'message', text })))
      throw new ApiError('CONFLICT', `Task ${taskId} is no longer running`)
    return { task_id: taskId, accepted: true }
  }

  /**
   * Stop the task's current turn: it ends `cancelled` with INTERRUPTED (its partial result
   * when the runner was up). A queued task ends so at once; an ended one is returned as it
   * is. The answer waits a while for the end, as a cancel does.
   */
  async interrupt(owner: string, taskId: string): Promise<Task> {
    const t = await this.o.records.get(owner, taskId)
    await this.recordStop('task.interrupted', t)
    if (!ACTIVE.includes(t.status)) return taskView(t)
    const here = t.instance_id === this.o.instanceId
    if (this.o.scheduler.dequeue(taskId) || (!here && (await this.o.dispatch.cancel(t))))
      return taskView(await this.o.cancels.ended(t, INTERRUPTED_END))
    // Listen before asking: the end is not missed.
    const wait = this.o.cancels.endOf(t, REMOTE_CANCEL_WAIT_MS)
    await this.deliver(t, { type: 'interrupt' })
    const now = await this.o.records.get(owner, taskId)
    if (!ACTIVE.includes(now.status)) {
      wait.stop()
      return taskView(now)
    }
    return wait.ended
  }

  /**
   * Record a cancel or interrupt of `t`: a success for the first that stops it (one across
   * instances), a failure for any that comes after it or after the task's own end.
   */
  async recordStop(action: 'task.cancelled' | 'task.interrupted', t: TaskRecord): Promise<void> {
    if (!this.o.audit) return
    const active = ACTIVE.includes(t.status)
    const first = active && (await this.o.once.claimOnce(`task-stop:${t.id}`, STOP_CLAIM_MS).catch(() => true))
    const details: AuditDetails = { status: t.status }
    if (!first) details.error = active ? 'another cancel or interrupt came first' : `the task had ended (${t.status})`
    await this.o.audit.record({
      action,
      target: { type: 'task', id: t.id },
      outcome: first ? 'success' : 'failure',
      details,
      actor: { type: 'user', id: t.owner_id },
    })
  }

  /** To the runner here, or relayed to the instance running the task; false when neither holds it. */
  private async deliver(t: TaskRecord, control: RunnerControl): Promise<boolean> {
    if (await this.o.local.here(t, control)) return true
    if (!t.instance_id || t.instance_id === this.o.instanceId) return false
    await this.o.dispatch.requestControl(t, control)
    return true
  }
}
