/** The stored task and how it reads: the record every part of tasks/ passes around. */
import { ACTIVE_TASK_STATUSES, isApiError, Task, TaskError, type TaskResult, type TaskStatus, type RunnerEvent } from '@berth/contract'
import type { OwnedRecord } from '../records/collection.js'
import { toView } from '../records/view.js'

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
  return toView(Task, r, { task_id: r.id, session_id: r.mode === 'session' ? r.session_id : null })
}

/** Runner outcomes that fail a task, and the error code each becomes. */
const OUTCOME_ERROR: Record<Exclude<ResultEvent['outcome'], 'success'>, TaskError['code']> = {
  error_max_turns: 'TURN_LIMIT_EXCEEDED',
  error_max_budget_usd: 'BUDGET_EXCEEDED',
  model_error: 'MODEL_ERROR',
  error_during_execution: 'CONTAINER_FAILED',
}

/**
 * How a runner result ends its task: completed, or failed with the outcome's code and the partial result.
 *
 * @example
 * ```ts
 * endOf({ ...result, outcome: 'error_max_turns' }).error?.code // 'TURN_LIMIT_EXCEEDED'
 * ```
 */
export function endOf(result: ResultEvent): TaskEnd & { status: 'completed' | 'failed'; result: TaskResult } {
  const taskResult: TaskResult = {
    text: result.text,
    tool_calls: result.tool_calls,
    input_tokens: result.input_tokens,
    output_tokens: result.output_tokens,
    cost_usd: result.cost_usd,
    turns: result.turns,
  }
  if (result.outcome === 'success') return { status: 'completed', result: taskResult }
  return { status: 'failed', result: taskResult, error: { code: OUTCOME_ERROR[result.outcome], error: result.error ?? result.outcome } }
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
  const code = isApiError(err) && TASK_ERROR_CODES.includes(err.code) ? (err.code as TaskError['code']) : 'INTERNAL_ERROR'
  return { code, error: isApiError(err) ? err.message : 'Internal error while running the task' }
}
