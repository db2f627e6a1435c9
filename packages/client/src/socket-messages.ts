import type { SubmitTask, Task, TaskStatus } from '@berth/core/contract'
import type { TaskEvent } from './events.js'

/** The submit body as a caller writes it (fields with defaults may be left out). */
export type SubmitTaskInput = Omit<SubmitTask, 'mode'> & { mode: SubmitTask['mode'] }

/** What a client sends over `/v1/ws`. */
export type SocketClientMessage =
  | { type: 'submit'; request_id: string; task: SubmitTaskInput }
  | { type: 'subscribe'; task_id: string }
  | { type: 'unsubscribe'; task_id: string }
  | { type: 'ping' }

/** A task's status changed (and the task as it is now); also the first answer to a subscribe. */
export interface TaskStatusMessage {
  type: 'task.status'
  task_id: string
  status: TaskStatus
  task: Task
}

/** One stored transcript event of a task, in `seq` order. */
export interface TaskEventMessage {
  type: 'task.event'
  task_id: string
  event: TaskEvent
}

/** A message about one task. */
export type TaskMessage = TaskStatusMessage | TaskEventMessage

/** What the server sends over `/v1/ws`. */
export type SocketServerMessage =
  | { type: 'submitted'; request_id: string; task_id: string; status: TaskStatus }
  | TaskMessage
  | { type: 'error'; request_id?: string; code: string; error: string; details?: Record<string, unknown> }
  | { type: 'pong' }
