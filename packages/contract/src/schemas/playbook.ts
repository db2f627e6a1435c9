import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { ERROR_STATUS } from '../errors.js'
import { Description, Id, Name, PageQuery, RecordMeta, Timestamp } from './common.js'
import { ToolName } from './profile.js'
import { TASK_STATUSES } from '../statuses.js'
import { TaskError } from './task.js'

/**
 * How a playbook is started: `manual` (the run endpoint only), `webhook` (also by its
 * webhook URL) or `schedule` (also at the times of its `schedule`).
 */
export const PlaybookTrigger = v.picklist(['manual', 'webhook', 'schedule'])

/** What happens to a slot that passed while no instance could run it: `skip` it (the default) or run once at start (`run_once`). */
export const MissedRunPolicy = v.picklist(['skip', 'run_once'])

const isTimeZone = (zone: string) => {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone })
    return true
  } catch {
    return false
  }
}

/** Body field `schedule`: a cron expression read in an IANA time zone. */
export const PlaybookScheduleInput = v.strictObject({
  /** 5 fields (minute hour day month weekday), or 6 with seconds first. */
  cron: v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(200)),
  /** IANA zone name, e.g. `Europe/Berlin` (default `UTC`). */
  timezone: v.optional(
    v.pipe(v.string(), maxLength(100), v.check(isTimeZone, 'must be an IANA time zone such as Europe/Berlin')),
  ),
  missed: v.optional(MissedRunPolicy),
})

/** A playbook's schedule as stored and shown. */
export const PlaybookSchedule = v.object({
  cron: v.string(),
  timezone: v.string(),
  missed: MissedRunPolicy,
})

const PlaybookPrompt = v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(128 * 1024))
const MaxTurns = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000))
const MaxBudget = v.pipe(v.number(), v.minValue(0.0001), v.maxValue(10_000))
const AllowedTools = v.pipe(v.array(ToolName), maxLength(200))

/**
 * A playbook: a stored prompt that runs as a task of its profile, on demand, when its
 * webhook is called or on its schedule. `webhook_secret` is present only in the answers that create one.
 */
export const Playbook = v.object({
  id: Id('playbook'),
  profile_id: Id('profile'),
  name: Name,
  description: Description,
  /** The instructions each run starts with. */
  prompt: v.string(),
  trigger_type: PlaybookTrigger,
  max_turns: v.nullable(v.number()),
  max_budget_usd: v.nullable(v.number()),
  /** Tools the run may use; `null`: the profile's. */
  allowed_tools: v.nullable(v.array(v.string())),
  /** Whether a webhook secret is set (the secret itself is shown once). */
  has_webhook_secret: v.boolean(),
  /** The secret of the webhook URL: in the create, rotate or update answer that made it, never again. */
  webhook_secret: v.optional(v.string()),
  /** `POST` here to trigger the playbook (with the secret in place of `{secret}`). */
  webhook_path: v.nullable(v.string()),
  /** False: neither its schedule nor its webhook starts it (the run endpoint still does). */
  enabled: v.boolean(),
  /** With `trigger_type: "schedule"`: when it runs; else `null`. */
  schedule: v.nullable(PlaybookSchedule),
  /** The next few run times of an enabled schedule (ISO), soonest first; else empty. */
  next_runs: v.array(Timestamp),
  /** The latest slot the scheduler took care of: the run it started, or `run_id: null` when it was skipped as missed. */
  last_slot: v.nullable(v.object({ at: Timestamp, run_id: v.nullable(Id('run')) })),
  ...RecordMeta,
})

/** Body of `POST /v1/playbooks`. */
export const CreatePlaybook = v.strictObject({
  profile_id: Id('profile'),
  name: Name,
  description: v.optional(Description),
  prompt: PlaybookPrompt,
  trigger_type: v.optional(PlaybookTrigger),
  max_turns: v.optional(v.nullable(MaxTurns)),
  max_budget_usd: v.optional(v.nullable(MaxBudget)),
  allowed_tools: v.optional(v.nullable(AllowedTools)),
  /** Required with `trigger_type: "schedule"`, refused with any other. */
  schedule: v.optional(PlaybookScheduleInput),
  enabled: v.optional(v.boolean()),
})

/** Body of `PATCH /v1/playbooks/:id`: any create field; `null` clears a limit. */
export const UpdatePlaybook = v.partial(CreatePlaybook)

/** A run has its task's status; a run whose task could not even be submitted is `failed`. */
export const PlaybookRunStatus = v.picklist(TASK_STATUSES)

/** One run of a playbook: the task it ran as and how it went. */
export const PlaybookRun = v.object({
  id: Id('run'),
  playbook_id: Id('playbook'),
  profile_id: Id('profile'),
  status: PlaybookRunStatus,
  trigger: PlaybookTrigger,
  task_id: v.nullable(Id('task')),
  workspace_id: v.nullable(Id('workspace')),
  /** The run's `pb-…` session. */
  session_id: v.nullable(v.string()),
  created_at: Timestamp,
  started_at: v.nullable(Timestamp),
  finished_at: v.nullable(Timestamp),
  /** The slot a scheduled run was started for; `null` for other triggers. */
  scheduled_for: v.nullable(Timestamp),
  error: v.nullable(
    v.object({
      /** An API error's code, or the code its task ended with (`INTERRUPTED`, `OUTPUT_INVALID`). */
      code: v.union([
        v.picklist(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS, ...(keyof typeof ERROR_STATUS)[]]),
        TaskError.entries.code,
      ]),
      error: v.string(),
    }),
  ),
})

/** `202` answer of starting a run (by the run endpoint or the webhook). */
export const PlaybookStarted = v.object({
  status: v.literal('started'),
  playbook_id: Id('playbook'),
  run_id: Id('run'),
})

/** Answer of rotating a playbook's webhook secret. */
export const PlaybookWebhookSecret = v.object({
  playbook_id: Id('playbook'),
  webhook_secret: v.string(),
  webhook_path: v.string(),
})

export const PlaybookRunsQuery = v.object({
  ...PageQuery,
  status: v.optional(PlaybookRunStatus),
})

export type Playbook = v.InferOutput<typeof Playbook>
export type CreatePlaybook = v.InferOutput<typeof CreatePlaybook>
export type UpdatePlaybook = v.InferOutput<typeof UpdatePlaybook>
export type PlaybookRun = v.InferOutput<typeof PlaybookRun>
export type PlaybookTrigger = v.InferOutput<typeof PlaybookTrigger>
export type PlaybookSchedule = v.InferOutput<typeof PlaybookSchedule>
export type PlaybookScheduleInput = v.InferOutput<typeof PlaybookScheduleInput>
export type MissedRunPolicy = v.InferOutput<typeof MissedRunPolicy>
