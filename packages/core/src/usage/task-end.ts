/**
 * A task's end as the ledger sees it. When the model gateway metered the task, its result
 * carries the gateway's tokens and cost (the runner's report is the agent's word, which it
 * could forge), and a run the gateway cut at a spent limit ends BUDGET_EXCEEDED. A task
 * that ran without the gateway adds its runner's figures to the ledger instead, once.
 */
import type { TaskEnd, TaskRecord } from '../tasks/task.js'
import type { Budgets } from './budgets.js'
import type { UsageLedger } from './ledger.js'

/**
 * Record the end of `task` in the ledger and return its end with metered figures.
 *
 * @example
 * ```ts
 * end = await settleUsage({ ledger, budgets }, task, end, { profile, endedAt: Date.now() })
 * ```
 */
export async function settleUsage(
  deps: { ledger: UsageLedger; budgets?: Budgets | undefined },
  task: TaskRecord,
  end: TaskEnd,
  at: { profile: { model: string | null; monthly_budget_usd?: number | null } | null; endedAt: number },
): Promise<TaskEnd> {
  const metered = await deps.ledger.taskUsage(task.id)
  const startedAt = Date.parse(task.started_at ?? task.created_at)
  const subject = { owner_id: task.owner_id, task_id: task.id, profile_id: task.profile_id }
  const seconds = Number.isNaN(startedAt) ? 0 : (at.endedAt - startedAt) / 1000
  const model = metered?.model ?? at.profile?.model ?? 'default'
  const reported = !metered && end.result ? end.result : undefined
  await deps.ledger.recordTaskEnd(subject, { model, seconds, ...(reported && { reported }) })
  if (!metered) return end
  let next: TaskEnd = end
  if (end.result)
    next = {
      ...end,
      result: {
        ...end.result,
        input_tokens: metered.input_tokens + metered.cache_read_tokens + metered.cache_write_tokens,
        output_tokens: metered.output_tokens,
        cost_usd: metered.cost_usd,
      },
    }
  // The gateway refused a model call at a spent limit: the agent saw an API error.
  if (next.status === 'failed' && next.error && next.error.code !== 'BUDGET_EXCEEDED') {
    if (task.max_budget_usd !== null && metered.cost_usd >= task.max_budget_usd)
      return {
        ...next,
        error: {
          code: 'BUDGET_EXCEEDED',
          error: `The task's budget of $${task.max_budget_usd} is spent ($${metered.cost_usd.toFixed(4)})`,
        },
      }
    const over = await deps.budgets?.exceeded(task.owner_id, {
      id: task.profile_id,
      monthly_budget_usd: at.profile?.monthly_budget_usd ?? null,
    })
    if (over) {
      const whose = over.scope === 'user' ? "The caller's" : "The profile's"
      return {
        ...next,
        error: {
          code: 'BUDGET_EXCEEDED',
          error: `${whose} monthly spending limit of $${over.limit} is spent ($${over.spent.toFixed(4)} this month)`,
        },
      }
    }
  }
  return next
}
