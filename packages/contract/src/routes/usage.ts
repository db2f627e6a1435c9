import { defineRoute } from '../route.js'
import { IdParams } from '../schemas/common.js'
import { AdminUsageQuery, SetUserLimits, UsageQuery, UsageReport, UserLimits } from '../schemas/usage.js'

const RANGE =
  'Days are UTC calendar days, `from` and `to` both included (default: the first of this month to today); `from` after `to` or a range over 366 days is 400. Tokens and cost are what the model gateway metered per model call where it ran the task, else what the runner reported at the task end.'

/** What callers used and spent, and the operator's monthly limits (see docs/OPERATIONS.md). */
export const usageRoutes = [
  defineRoute({
    name: 'usage.get',
    method: 'GET',
    path: '/v1/usage',
    auth: 'caller',
    tag: 'usage',
    summary: 'Your tokens, cost, tasks and task time, grouped by day, profile or model',
    description: RANGE,
    query: UsageQuery,
    response: UsageReport,
  }),
  defineRoute({
    name: 'admin.usage',
    method: 'GET',
    path: '/admin/usage',
    auth: 'admin',
    tag: 'admin',
    summary: "Every caller's usage (or one caller's with `user_id`), one row per caller and group",
    description: RANGE,
    query: AdminUsageQuery,
    response: UsageReport,
  }),
  defineRoute({
    name: 'admin.limits.get',
    method: 'GET',
    path: '/admin/users/:id/limits',
    auth: 'admin',
    tag: 'admin',
    summary: "A caller's monthly spending limit and this month's spend, and its caps on running workspaces",
    params: IdParams('user'),
    response: UserLimits,
  }),
  defineRoute({
    name: 'admin.limits.set',
    method: 'PUT',
    path: '/admin/users/:id/limits',
    auth: 'admin',
    tag: 'admin',
    summary: "Set (or clear with null) a caller's monthly spending limit in USD and its caps",
    description:
      'Once the calendar month’s spend (UTC) reaches it, submits are 402 BUDGET_EXCEEDED with `details: { scope, limit, spent, resets_at }` and the model gateway holds the caller’s running tasks to what is left during each model call (a streamed answer is ended at the limit, further calls are refused), so they end failed with BUDGET_EXCEEDED and their partial result. A profile’s `monthly_budget_usd` works the same for its tasks. `max_running` and `pool_share` replace the operator’s defaults for this caller (null: the default): a caller at its cap has its tasks wait in the queue (`waiting.reason: "caller_cap"`) while other callers’ tasks start.',
    params: IdParams('user'),
    body: SetUserLimits,
    response: UserLimits,
  }),
] as const
