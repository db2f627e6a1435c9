/**
 * The task statuses and transcript event types, spelled out once. Schemas, the server, the
 * client, the CLI and the console import these lists instead of writing their own.
 */

/** Every status a task goes through, in order: queued → starting → running → one of the ended ones. */
export const TASK_STATUSES = ['queued', 'starting', 'running', 'completed', 'failed', 'cancelled'] as const

/** The statuses of a task that may still change. */
export const ACTIVE_TASK_STATUSES = ['queued', 'starting', 'running'] as const

/** The statuses of a task that can change no more. */
export const ENDED_TASK_STATUSES = ['completed', 'failed', 'cancelled'] as const

/**
 * The `type` of every transcript event: the runner's, in the order a run writes them, then
 * Berth's own (`rewind`: the session was taken back to the event's task).
 */
export const TRANSCRIPT_EVENT_TYPES = [
  'user_message',
  'turn_start',
  'token',
  'tool_call',
  'permission_request',
  'permission_decision',
  'tool_result',
  'turn_end',
  'result',
  'error',
  'background_task',
  'rewind',
] as const

/** One of {@link ENDED_TASK_STATUSES}. */
export type EndedTaskStatus = (typeof ENDED_TASK_STATUSES)[number]

const ENDED: ReadonlySet<string> = new Set(ENDED_TASK_STATUSES)

/**
 * True once a task can change no more: `completed`, `failed` or `cancelled`.
 *
 * @example
 * ```ts
 * if (isEndedStatus(task.status)) console.log(task.result?.text ?? task.error?.code)
 * ```
 */
export function isEndedStatus(status: string): status is EndedTaskStatus {
  return ENDED.has(status)
}
