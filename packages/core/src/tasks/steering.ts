/** Steering a run this instance holds: the control lines its runner reads (decisions, interrupts, messages), and an interrupt before the runner is up. */
import type { RunnerControl } from '@berth/contract'
import type { LocalCancel } from './cancel.js'
import type { Scheduler } from './scheduler.js'
import { INTERRUPTED_END, type TaskRecord } from './task.js'

/**
 * The reason a run's signal aborts with when its task is interrupted before its runner
 * could take the `interrupt` line (while its container is leased): it ends `cancelled`
 * with INTERRUPTED.
 *
 * @example
 * ```ts
 * abort.abort(new TaskInterrupted('task_1'))
 * ```
 */
export class TaskInterrupted extends Error {
  override readonly name = 'TaskInterrupted'
  constructor(readonly taskId: string) {
    super(`task ${taskId} was interrupted`)
  }
}

/**
 * Where the control lines of the runs under way here go: each run attaches its runner's
 * writer while it runs and detaches it when it ends.
 *
 * @example
 * ```ts
 * const detach = controls.attach(task.id, (c) => session.send(c))
 * controls.send(task.id, { type: 'interrupt' }) // true: on its way to the runner
 * detach()
 * ```
 */
export class RunControls {
  private readonly writers = new Map<string, (control: RunnerControl) => boolean>()

  attach(taskId: string, send: (control: RunnerControl) => boolean): () => void {
    this.writers.set(taskId, send)
    return () => {
      if (this.writers.get(taskId) === send) this.writers.delete(taskId)
    }
  }

  /** Write `control` to the task's runner; false when no run of it is under way here. */
  send(taskId: string, control: RunnerControl): boolean {
    return this.writers.get(taskId)?.(control) ?? false
  }
}

/**
 * Applies a control to a task this instance holds, for a caller here or one on another
 * instance (relayed like a cancel): to its runner when it runs; an interrupt of a task
 * queued here ends it `cancelled` with INTERRUPTED, and one of a run whose runner is not
 * up yet aborts it with {@link TaskInterrupted}.
 *
 * @example
 * ```ts
 * const local = new LocalSteer({ controls, scheduler, cancels })
 * if (!(await local.here(task, { type: 'message', text: 'Use pnpm' }))) await dispatch.requestControl(task, control)
 * ```
 */
export class LocalSteer {
  constructor(
    private readonly o: { controls: RunControls; scheduler: Scheduler; cancels: Pick<LocalCancel, 'ended'> },
  ) {}

  /** False when this instance holds the task neither queued nor running (or a message found no runner). */
  async here(t: TaskRecord, control: RunnerControl): Promise<boolean> {
    if (this.o.controls.send(t.id, control)) return true
    if (control.type !== 'interrupt') return false
    if (this.o.scheduler.dequeue(t.id)) {
      await this.o.cancels.ended(t, INTERRUPTED_END)
      return true
    }
    return this.o.scheduler.abort(t.id, new TaskInterrupted(t.id))
  }
}
