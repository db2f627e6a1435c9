import * as v from 'valibot'
import { Id, Timestamp } from './common.js'

/** A calendar day in UTC, `YYYY-MM-DD`. */
export const UsageDay = v.pipe(
  v.string(),
  v.regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date as YYYY-MM-DD'),
  v.check(
    (s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) && new Date(`${s}T00:00:00Z`).toISOString().startsWith(s),
    'must be a real calendar date',
  ),
)

/** How usage rows are grouped. */
export const UsageGroupBy = v.picklist(['day', 'profile', 'model'])

/** The longest range one usage query covers, in days. */
export const USAGE_MAX_DAYS = 366

/** Query of `GET /v1/usage`: days in UTC, both ends included (default: this month so far). */
export const UsageQuery = v.object({
  from: v.optional(UsageDay),
  to: v.optional(UsageDay),
  group_by: v.optional(UsageGroupBy, 'day'),
})

/** Query of `GET /admin/usage`: {@link UsageQuery}, optionally for one caller. */
export const AdminUsageQuery = v.object({
  ...UsageQuery.entries,
  user_id: v.optional(Id('user')),
})

/** Tokens, cost, tasks and task time of one group. */
export const UsageFigures = v.object({
  input_tokens: v.number(),
  output_tokens: v.number(),
  cache_read_tokens: v.number(),
  cache_write_tokens: v.number(),
  cost_usd: v.number(),
  /** Model calls metered by the gateway (0 for tasks that ran without it). */
  model_calls: v.number(),
  /** Tasks that ended in the range. */
  tasks: v.number(),
  /** Their running time, in seconds. */
  task_seconds: v.number(),
})

/** One row: a caller's usage of one day, profile or model. */
export const UsageGroup = v.object({
  user_id: v.string(),
  /** The day, profile id or model of the row, as `group_by` says. */
  key: v.string(),
  ...UsageFigures.entries,
})

/** Answer of the usage routes: rows highest cost first (by day: oldest first), and their sum. */
export const UsageReport = v.object({
  from: UsageDay,
  to: UsageDay,
  group_by: UsageGroupBy,
  groups: v.array(UsageGroup),
  total: UsageFigures,
})

/** A monthly spending limit in USD; `null`: none. */
export const MonthlyBudget = v.nullable(v.pipe(v.number(), v.minValue(0), v.maxValue(1_000_000_000)))

/** A caller's own cap on running workspaces (sessions holding containers included); `null`: the operator's default. */
export const MaxRunning = v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100_000)))

/** A caller's own share of the pool's containers, over 0 and at most 1; `null`: the operator's default. */
export const PoolShare = v.nullable(v.pipe(v.number(), v.gtValue(0), v.maxValue(1)))

/**
 * Body of `PUT /admin/users/:id/limits`: the caller's limits, replaced (absent or `null`:
 * none, or for the caps the operator's default).
 */
export const SetUserLimits = v.strictObject({
  monthly_budget_usd: v.optional(MonthlyBudget),
  max_running: v.optional(MaxRunning),
  pool_share: v.optional(PoolShare),
})

/** A caller's limits and this month's spend against them. */
export const UserLimits = v.object({
  user_id: Id('user'),
  monthly_budget_usd: MonthlyBudget,
  /** Spent this calendar month (UTC), every profile of the caller. */
  spent_usd: v.number(),
  /** When the month's spend starts again from zero. */
  resets_at: Timestamp,
  /** The caller's own cap on running workspaces (`null`: the operator's default). */
  max_running: MaxRunning,
  /** The caller's own share of the pool (`null`: the operator's default). */
  pool_share: PoolShare,
  /** The most workspaces the caller may hold at once now, both caps applied (`null`: no cap). */
  effective_max_running: v.nullable(v.number()),
})

export type UsageQuery = v.InferOutput<typeof UsageQuery>
export type AdminUsageQuery = v.InferOutput<typeof AdminUsageQuery>
export type UsageFigures = v.InferOutput<typeof UsageFigures>
export type UsageGroup = v.InferOutput<typeof UsageGroup>
export type UsageReport = v.InferOutput<typeof UsageReport>
export type UserLimits = v.InferOutput<typeof UserLimits>
