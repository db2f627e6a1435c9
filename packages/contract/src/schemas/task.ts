import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, PageQuery, Timestamp } from './common.js'
import { ToolName } from './profile.js'
import { TASK_STATUSES, TRANSCRIPT_EVENT_TYPES } from '../statuses.js'

/** `queued` → `starting` → `running` → `completed` | `failed` | `cancelled`. */
export const TaskStatus = v.picklist(TASK_STATUSES)
export const TaskMode = v.picklist(['batch', 'session'])
export const Priority = v.picklist(['low', 'normal', 'high'])
/** Session ids: `sess_…` for sessions, `pb-…` for playbook-only workspaces. */
export const SessionId = v.pipe(
  v.string(),
  v.regex(/^(sess_[a-z0-9]{1,64}|pb-[a-z0-9_-]{1,64})$/, 'must be a session id (sess_…)'),
)

/** Body of `POST /v1/tasks`. */
export const SubmitTask = v.pipe(
  v.strictObject({
    mode: TaskMode,
    profile_id: Id('profile'),
    prompt: v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(256 * 1024)),
    session_id: v.optional(SessionId),
    allowed_tools: v.optional(v.pipe(v.array(ToolName), maxLength(200))),
    max_turns: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))),
    max_budget_usd: v.optional(v.pipe(v.number(), v.minValue(0.0001), v.maxValue(10_000))),
    priority: v.optional(Priority),
  }),
  v.forward(
    v.check((t) => t.session_id === undefined || t.mode === 'session', 'session_id needs mode "session"'),
    ['session_id'],
  ),
)

export const TaskResult = v.object({
  text: v.string(),
  tool_calls: v.array(v.object({ id: v.string(), name: v.string(), input: v.unknown() })),
  input_tokens: v.number(),
  output_tokens: v.number(),
  cost_usd: v.number(),
  turns: v.number(),
})

export const TaskError = v.object({
  code: v.picklist(['TURN_LIMIT_EXCEEDED', 'BUDGET_EXCEEDED', 'CONTAINER_FAILED', 'MODEL_ERROR', 'INTERNAL_ERROR']),
  error: v.string(),
})

/** A task as read. `result` once it ran (partial for limit failures), `error` once failed. */
export const Task = v.object({
  task_id: Id('task'),
  status: TaskStatus,
  mode: TaskMode,
  profile_id: Id('profile'),
  priority: Priority,
  prompt: v.string(),
  /** Session mode only. */
  session_id: v.nullable(v.string()),
  workspace_id: v.nullable(Id('workspace')),
  created_at: Timestamp,
  started_at: v.nullable(Timestamp),
  finished_at: v.nullable(Timestamp),
  result: v.nullable(TaskResult),
  error: v.nullable(TaskError),
})

/** `202` answer of a submit. */
export const SubmittedTask = v.object({
  task_id: Id('task'),
  status: TaskStatus,
  created_at: Timestamp,
  /** The session the task runs in (session mode; `null` for batch), for follow-ups without a second read. */
  session_id: v.nullable(v.string()),
  workspace_id: Id('workspace'),
})

export const TaskListQuery = v.object({
  ...PageQuery,
  status: v.optional(TaskStatus),
  mode: v.optional(TaskMode),
})

/** One stored transcript event: `{ seq, at, type, ... }` (the runner's event plus its place). */
export const TranscriptEvent = v.looseObject({
  seq: v.pipe(v.number(), v.integer()),
  at: Timestamp,
  type: v.picklist(TRANSCRIPT_EVENT_TYPES),
  task_id: Id('task'),
})

export const EventsQuery = v.object({
  after: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0)), 0),
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100)), 100),
})

export type Task = v.InferOutput<typeof Task>
export type SubmitTask = v.InferOutput<typeof SubmitTask>
export type SubmittedTask = v.InferOutput<typeof SubmittedTask>
export type TaskStatus = v.InferOutput<typeof TaskStatus>
export type TaskResult = v.InferOutput<typeof TaskResult>
export type TaskError = v.InferOutput<typeof TaskError>
export type TranscriptEvent = v.InferOutput<typeof TranscriptEvent>
