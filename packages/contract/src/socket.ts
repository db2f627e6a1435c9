/**
 * The WebSocket protocol of `/v1/ws`, declared once: what a client sends, what the server
 * answers. The server parses and types its messages with these schemas, the client and the
 * console type theirs with them, and the OpenAPI document describes them from them.
 */
import * as v from 'valibot'
import { ErrorBodySchema, Id, Timestamp } from './schemas/common.js'
import { maxLength, minLength } from './schemas/length.js'
import { DecideApproval, SubmitTask, Task, TaskMessage, TaskStatus } from './schemas/task.js'
import { RunnerEvent } from './runner-protocol.js'

/** Close code for a client that lets too much queue up unread (more than 1 MiB by default). */
export const SLOW_CONSUMER_CLOSE = 4008

/** The caller's own id for a submit: the same id again is the same task, never a second one. */
const RequestId = v.pipe(v.string(), minLength(1), maxLength(200))

const submitFields = { type: v.literal('submit'), request_id: RequestId }
const Subscribe = v.object({ type: v.literal('subscribe'), task_id: v.string() })
const Unsubscribe = v.object({ type: v.literal('unsubscribe'), task_id: v.string() })
const Ping = v.object({ type: v.literal('ping') })
/** Decide a permission request, as `POST /v1/tasks/:id/approvals/:request_id` does. */
const Decide = v.object({
  type: v.literal('decide'),
  task_id: Id('task'),
  request_id: Id('approval'),
  ...DecideApproval.entries,
})
/** Hand the running agent a message, as `POST /v1/tasks/:id/messages` does. */
const Send = v.object({ type: v.literal('send'), task_id: Id('task'), ...TaskMessage.entries })
/** Stop the task's current turn, as `POST /v1/tasks/:id/interrupt` does. */
const Interrupt = v.object({ type: v.literal('interrupt'), task_id: Id('task') })

/**
 * What a client may send: `submit` (a task, once per `request_id`), `subscribe` and
 * `unsubscribe` (a task's status and events), `decide` (a permission request), `send` (a
 * message to the running agent), `interrupt`, `ping`. A `decide`, `send` or `interrupt`
 * that fails is answered with an `error` carrying its `task_id`; one that works is seen in
 * the task's events (`permission_decision`, `user_message`) and status.
 */
export const ClientMessage = v.variant('type', [
  v.object({ ...submitFields, task: SubmitTask }),
  Subscribe,
  Unsubscribe,
  Decide,
  Send,
  Interrupt,
  Ping,
])

/**
 * {@link ClientMessage} with the submitted task left unread: the server reads a message in
 * two steps, so a bad task is answered as a task error carrying the message's `request_id`.
 */
export const ClientEnvelope = v.variant('type', [
  v.object({ ...submitFields, task: v.unknown() }),
  Subscribe,
  Unsubscribe,
  Decide,
  Send,
  Interrupt,
  Ping,
])

/** One stored transcript event of a task: the runner's event plus its place in the log (`seq`), its time and its task. */
export const TaskEvent = v.intersect([
  RunnerEvent,
  v.object({ seq: v.pipe(v.number(), v.integer()), at: Timestamp, task_id: Id('task') }),
])

/** The answer to a submit: the task it made (or the one the same `request_id` made before). */
export const SubmittedMessage = v.object({
  type: v.literal('submitted'),
  request_id: v.string(),
  task_id: v.string(),
  status: TaskStatus,
})

/** A task's status changed (and the task as it is now); also the first answer to a subscribe. */
export const TaskStatusMessage = v.object({
  type: v.literal('task.status'),
  task_id: v.string(),
  status: TaskStatus,
  task: Task,
})

/** One stored transcript event of a task: what already happened first, then live, each once, in `seq` order. */
export const TaskEventMessage = v.object({ type: v.literal('task.event'), task_id: v.string(), event: TaskEvent })

/** A message that failed, carrying the `request_id` or `task_id` of the message it answers. */
export const ErrorMessage = v.object({
  type: v.literal('error'),
  request_id: v.optional(v.string()),
  task_id: v.optional(v.string()),
  ...ErrorBodySchema.entries,
})

/** The answer to a `ping`. */
export const PongMessage = v.object({ type: v.literal('pong') })

/** What the server sends. */
export const ServerMessage = v.variant('type', [
  SubmittedMessage,
  TaskStatusMessage,
  TaskEventMessage,
  ErrorMessage,
  PongMessage,
])

/** A message a client sends, as it writes it (fields with defaults may be left out). */
export type ClientMessage = v.InferInput<typeof ClientMessage>
/** A message the server sends. */
export type ServerMessage = v.InferOutput<typeof ServerMessage>
/** One stored transcript event of a task; narrow it by `type`. */
export type TaskEvent = v.InferOutput<typeof TaskEvent>
export type SubmittedMessage = v.InferOutput<typeof SubmittedMessage>
export type TaskStatusMessage = v.InferOutput<typeof TaskStatusMessage>
export type TaskEventMessage = v.InferOutput<typeof TaskEventMessage>
export type ErrorMessage = v.InferOutput<typeof ErrorMessage>
