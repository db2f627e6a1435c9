import { isEndedStatus, type EndedTaskStatus, type Task, type TaskEvent, type TaskStatus } from '@berth/contract'

/**
 * One transcript event of a task, as stored: the runner's event (`user_message`,
 * `turn_start`, `token`, `tool_call`, `tool_result`, `turn_end`, `result`, `error`) plus its
 * place in the log (`seq`, increasing by one), when it happened (`at`) and its `task_id`.
 * Narrow it by `type`:
 *
 * @example
 * ```ts
 * if (event.type === 'token') process.stdout.write(event.text)
 * if (event.type === 'tool_call') console.log(event.name, event.input)
 * ```
 */
export type { TaskEvent }

/** The event of one `type`, e.g. `TaskEventOf<'tool_call'>`. */
export type TaskEventOf<T extends TaskEvent['type']> = Extract<TaskEvent, { type: T }>

/** A task as read (`GET /v1/tasks/:id`). */
export type { Task, TaskStatus }

/**
 * True once a task can change no more: `completed`, `failed` or `cancelled`.
 *
 * @example
 * ```ts
 * if (isFinished(task.status)) console.log(task.result?.text ?? task.error?.code)
 * ```
 */
export function isFinished(status: TaskStatus): status is EndedTaskStatus {
  return isEndedStatus(status)
}
