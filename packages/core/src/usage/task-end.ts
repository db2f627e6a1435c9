/**
 * A task's end as the ledger sees it: its own model calls, counted once. Where the model
 * gateway served the run, they are the gateway's (each recorded as it was answered; the
 * runner's report is the agent's word, which it could forge); otherwise they are the
 * runner's own count (each answer the offline model gave, or each answer streamed to the
 * SDK), recorded here. Either way the task's result carries the ledger's sums for the
 * task, so the result, `/v1/usage` and the spending limits add up the same figures. A run
 * the gateway cut at a spent limit ends BUDGET_EXCEEDED.
 */
import type { ResultEvent, TaskEnd, TaskRecord } from '../tasks/task.js'
import type { Budgets } from './budgets.js'
import type { TaskUsage, UsageLedger, UsageSubject } from './ledger.js'

/**
 * Record the end of `task` in the ledger and return its end with its metered figures.
 * `runner` is the runner's result line, whose own count stands for a run without the gateway.
 *
 * @example
 * ```ts
 * end = await settleUsage({ ledger, budgets }, task, end, { profile, endedAt: Date.now(), runner: result })
 * ```
 */
export async function settleUsage(
  deps: { ledger: UsageLedger; budgets?: Budgets | undefined },
  task: TaskRecord,
  end: TaskEnd,
  at: {
    profile: { model: string | null; monthly_budget_usd?: number | null } | null
    endedAt: number
    runner?: ResultEvent | null
  },
): Promise<TaskEnd> {
  const subject = { owner_id: task.owner_id, task_id: task.id, profile_id: task.profile_id }
  const fallbackModel = at.profile?.model ?? 'default'
  // Records from before `metered_by`: the gateway's when it counted any call.
  const by = task.metered_by ?? ((await deps.ledger.taskUsage(task.id)) ? 'gateway' : 'runner')
  if (by === 'runner' && at.runner) await recordRunnerCalls(deps.ledger, subject, at.runner, fallbackModel)
  const metered = await deps.ledger.taskUsage(task.id)
  const startedAt = Date.parse(task.started_at ?? task.created_at)
  const seconds = Number.isNaN(startedAt) ? 0 : (at.endedAt - startedAt) / 1000
  await deps.ledger.recordTaskEnd(subject, { model: metered?.model ?? fallbackModel, seconds })
  let next: TaskEnd = end
  if (end.result) next = { ...end, result: { ...end.result, ...figures(metered) } }
  if (by !== 'gateway' || !metered) return next
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

/** A result's tokens and cost: the task's recorded calls (none: zero). Input counts cache reads and writes. */
function figures(t: TaskUsage | null): { input_tokens: number; output_tokens: number; cost_usd: number } {
  if (!t) return { input_tokens: 0, output_tokens: 0, cost_usd: 0 }
  return {
    input_tokens: t.input_tokens + t.cache_read_tokens + t.cache_write_tokens,
    output_tokens: t.output_tokens,
    cost_usd: t.cost_usd,
  }
}

/** The calls a runner counted, by model, into the ledger as the gateway would have recorded them. */
async function recordRunnerCalls(
  ledger: UsageLedger,
  subject: UsageSubject,
  r: ResultEvent,
  fallbackModel: string,
): Promise<void> {
  // A runner from before `model_usage`: its sums as one group of the profile's model, a call per turn.
  const groups = r.model_usage ?? [
    {
      model: fallbackModel,
      calls: r.turns,
      input_tokens: r.input_tokens,
      output_tokens: r.output_tokens,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd: r.cost_usd,
    },
  ]
  for (const g of groups) {
    if (g.calls === 0) continue
    const usage = {
      model: g.model,
      input_tokens: g.input_tokens,
      output_tokens: g.output_tokens,
      cache_creation_input_tokens: g.cache_write_tokens,
      cache_read_input_tokens: g.cache_read_tokens,
      cost_usd: g.cost_usd,
    }
    await ledger.recordCall(subject, usage, g.calls)
  }
}
