import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, PageQuery, Timestamp } from './common.js'
import { ApprovalRules, ApprovalTimeout, ToolName } from './profile.js'
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

/** Largest `output_schema` accepted, as JSON text. */
export const OUTPUT_SCHEMA_MAX_BYTES = 64 * 1024

/**
 * A JSON Schema (an object, at most 64 KiB as JSON) the task's answer must satisfy: the
 * agent runs with the SDK's structured output and `result.structured_output` holds the
 * value, validated against it.
 */
export const OutputSchema = v.pipe(
  v.record(v.string(), v.unknown()),
  v.check((s) => JSON.stringify(s).length <= OUTPUT_SCHEMA_MAX_BYTES, 'must be at most 64 KiB as JSON'),
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
    /** Spend cap in USD, held during each model call (a streamed answer is ended there); the task then fails BUDGET_EXCEEDED with its partial result. */
    max_budget_usd: v.optional(v.pipe(v.number(), v.minValue(0.0001), v.maxValue(10_000))),
    /** Wall time the agent may work, in seconds (default and cap: the operator's); past it the task fails TIME_LIMIT_EXCEEDED with its partial result. */
    max_duration_s: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(7 * 86_400))),
    priority: v.optional(Priority),
    /** Tools that wait for approval in this task; replaces the profile's list (`[]`: none). */
    require_approval: v.optional(ApprovalRules),
    /** Seconds a permission request waits before it is denied; default the profile's. */
    approval_timeout_s: v.optional(ApprovalTimeout),
    output_schema: v.optional(OutputSchema),
  }),
  v.forward(
    v.check((t) => t.session_id === undefined || t.mode === 'session', 'session_id needs mode "session"'),
    ['session_id'],
  ),
)

export const TaskResult = v.object({
  text: v.string(),
  /** Each call with the input it ran with; `original_input` is the agent's when an approval replaced it. */
  tool_calls: v.array(
    v.object({ id: v.string(), name: v.string(), input: v.unknown(), original_input: v.optional(v.unknown()) }),
  ),
  input_tokens: v.number(),
  output_tokens: v.number(),
  cost_usd: v.number(),
  turns: v.number(),
  /** The answer as the submission's `output_schema` asked for it (absent without one). */
  structured_output: v.optional(v.unknown()),
})

/**
 * Why a task failed or stopped: `TIME_LIMIT_EXCEEDED` (ran past its `max_duration_s`; partial result kept), `INTERRUPTED` (a caller's interrupt; the task is
 * `cancelled` with its partial result), `OUTPUT_INVALID` (no answer valid for `output_schema`),
 * `DISK_LIMIT_EXCEEDED` (the workspace or `/tmp` filled up to its size and the agent's runner could not go on).
 */
export const TaskError = v.object({
  code: v.picklist([
    'TURN_LIMIT_EXCEEDED',
    'BUDGET_EXCEEDED',
    'TIME_LIMIT_EXCEEDED',
    'CONTAINER_FAILED',
    'MODEL_ERROR',
    'INTERNAL_ERROR',
    'INTERRUPTED',
    'OUTPUT_INVALID',
    'DISK_LIMIT_EXCEEDED',
  ]),
  error: v.string(),
})

/**
 * Why a queued task has not started: `caller_cap` (its caller holds as many running
 * workspaces as its caps allow), `pool_full` (every container of the pool is in use) or
 * `memory` (the host's memory budget is taken by other containers).
 */
export const TaskWaiting = v.object({
  reason: v.picklist(['caller_cap', 'pool_full', 'memory']),
  message: v.string(),
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
  /** Permission requests of this task waiting for a decision. */
  pending_approvals: v.number(),
  /** While queued: why it has not started yet (null: nothing holds it back, or it started). */
  waiting: v.nullable(TaskWaiting),
  /** When its session was taken back to an earlier task (`POST /v1/workspaces/:id/rewind`): what it did is undone (null: never). */
  rewound_at: v.nullable(Timestamp),
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

/** A permission request: a tool call waiting for, or past, a person's decision. */
export const Approval = v.object({
  request_id: Id('approval'),
  task_id: Id('task'),
  tool: v.string(),
  /** The tool's input: the agent's, or the one the decision replaced it with (which ran). */
  input: v.unknown(),
  /** The agent's input, when an `allow` replaced it (`input` is then what ran). */
  original_input: v.optional(v.unknown()),
  /** `pending` until decided; `expired`: denied at its timeout; `cancelled`: the task ended first. */
  status: v.picklist(['pending', 'allowed', 'denied', 'expired', 'cancelled']),
  created_at: Timestamp,
  /** When it stops waiting: denied then. */
  expires_at: Timestamp,
  decided_at: v.nullable(Timestamp),
  /** The reason given with the decision (told to the agent on a denial). */
  message: v.nullable(v.string()),
})

/** Body of `POST /v1/tasks/:id/approvals/:request_id`. `input` replaces the tool's input when allowing. */
export const DecideApproval = v.strictObject({
  decision: v.picklist(['allow', 'deny']),
  message: v.optional(v.pipe(v.string(), maxLength(4000))),
  input: v.optional(v.record(v.string(), v.unknown())),
})

/** Path parameters of one approval. */
export const ApprovalParams = v.object({ id: Id('task'), request_id: Id('approval') })

/** Body of `POST /v1/tasks/:id/messages`: handed to the agent at its next turn boundary. */
export const TaskMessage = v.strictObject({
  text: v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(64 * 1024)),
})

/** Answer of `POST /v1/tasks/:id/messages`. */
export const TaskMessageAccepted = v.object({ task_id: Id('task'), accepted: v.literal(true) })

export type Approval = v.InferOutput<typeof Approval>
export type DecideApproval = v.InferOutput<typeof DecideApproval>
export type TaskMessage = v.InferOutput<typeof TaskMessage>
export type Task = v.InferOutput<typeof Task>
export type SubmitTask = v.InferOutput<typeof SubmitTask>
export type SubmittedTask = v.InferOutput<typeof SubmittedTask>
export type TaskStatus = v.InferOutput<typeof TaskStatus>
export type TaskResult = v.InferOutput<typeof TaskResult>
export type TaskWaiting = v.InferOutput<typeof TaskWaiting>
export type TaskError = v.InferOutput<typeof TaskError>
export type TranscriptEvent = v.InferOutput<typeof TranscriptEvent>
