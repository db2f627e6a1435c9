/** What callers do to a task under way: decide its permission requests, interrupt it, send it messages (here or on the instance running it). */
import { ApiError, notFound, type Approval, type DecideApproval, type RunnerControl, type Task } from '@berth/contract'
import type { OwnedCollection } from '../records/collection.js'
import type { Approvals } from './approvals.js'
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

  /** Decide a permission request once (409 the second time, 404 for an unknown or another caller's one). */
  async decide(owner: string, taskId: string, requestId: string, body: DecideApproval): Promise<Approval> {
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
    return this.o.approvals.view(decided)
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

  /** To the runner here, or relayed to the instance running the task; false when neither holds it. */
  private async deliver(t: TaskRecord, control: RunnerControl): Promise<boolean> {
    if (await this.o.local.here(t, control)) return true
    if (!t.instance_id || t.instance_id === this.o.instanceId) return false
    await this.o.dispatch.requestControl(t, control)
    return true
  }
}
