/** A task's wall-time limit: what a submit may ask, and the run's clock once the agent works. */
import { ApiError, type RunnerControl } from '@berth/contract'
import type { TaskEnd } from './task.js'

/** The operator's wall-time limits, in seconds (null: none). */
export interface TimeLimitSettings {
  /** A task that asks for none gets this. */
  defaultS: number | null
  /** The most a task may ask for. */
  maxS: number | null
}

/** One hour by default, at most a day. */
export const DEFAULT_TIME_LIMIT: TimeLimitSettings = { defaultS: 3_600, maxS: 86_400 }

/** How long an interrupted run may take to hand back its partial result before it is stopped. */
export const TIME_LIMIT_GRACE_MS = 15_000

/**
 * The wall time a task gets: what it asked, else the default (never above the cap); a
 * request above the cap is refused with 400 rather than cut silently.
 *
 * @example
 * ```ts
 * taskDuration(undefined, { defaultS: 3600, maxS: 86400 }) // 3600
 * taskDuration(600, { defaultS: 3600, maxS: 86400 }) // 600
 * ```
 */
export function taskDuration(asked: number | undefined, limits: TimeLimitSettings = DEFAULT_TIME_LIMIT): number | null {
  const { defaultS, maxS } = limits
  if (asked !== undefined && maxS !== null && asked > maxS) {
    const message = `must be at most ${maxS} (this server's limit)`
    throw new ApiError('VALIDATION_FAILED', `max_duration_s ${message}`, {
      issues: [{ location: 'body', path: 'max_duration_s', message }],
    })
  }
  const chosen = asked ?? defaultS
  return chosen === null ? maxS : maxS === null ? chosen : Math.min(chosen, maxS)
}

/**
 * A run's clock. Started when the task is `running`: at the limit the runner is
 * interrupted (it ends the turn and hands back the partial result); a runner that has not
 * ended `graceMs` later is stopped through {@link forced}. Either way the task fails
 * TIME_LIMIT_EXCEEDED ({@link end}).
 *
 * @example
 * ```ts
 * const limit = new RunTimeLimit(task.max_duration_s)
 * const session = runnerEvents(deps, { ...run, signal: AbortSignal.any([signal, limit.forced.signal]) })
 * limit.start((c) => session.send(c))
 * ```
 */
export class RunTimeLimit {
  /** Aborted when the runner outlived its grace after the interrupt. */
  readonly forced = new AbortController()
  private passed = false
  private readonly timers: ReturnType<typeof setTimeout>[] = []

  constructor(
    private readonly seconds: number | null | undefined,
    private readonly graceMs = TIME_LIMIT_GRACE_MS,
  ) {}

  /** True once the run passed its limit. */
  get fired(): boolean {
    return this.passed
  }

  start(send: (control: RunnerControl) => boolean): void {
    if (!this.seconds) return
    this.timers.push(
      setTimeout(() => {
        this.passed = true
        send({ type: 'interrupt' })
        this.timers.push(setTimeout(() => this.forced.abort(new Error('time limit')), this.graceMs))
      }, this.seconds * 1000),
    )
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t)
  }

  /** The end of a run past its limit: failed, with the partial result it had. */
  end(had: TaskEnd | null): TaskEnd {
    return {
      status: 'failed',
      result: had?.result ?? null,
      error: { code: 'TIME_LIMIT_EXCEEDED', error: `The task ran past its time limit of ${this.seconds} s` },
    }
  }
}
