import { costOf, type RunnerModelUsage, type TokenUsage } from '@berth/contract'

/** What the result says of the run's model calls: the sums and the same by model. */
export interface MeteredUsage {
  input_tokens: number
  output_tokens: number
  cost_usd: number
  model_usage: RunnerModelUsage[]
}

/**
 * This run's own model calls, one answer at a time, summed by model and priced with the
 * contract's table (the model gateway's). Only the answers this run received count: the
 * SDK's `total_cost_usd` and `modelUsage` carry on from a resumed or forked conversation's
 * saved total, so a session's follow-ups would count every earlier task again.
 */
export class Meter {
  private readonly byModel = new Map<string, RunnerModelUsage>()

  /** One model call's answer, with the usage the provider reported for it. */
  add(model: string, usage: TokenUsage): void {
    const m = this.byModel.get(model) ?? {
      model,
      calls: 0,
      input_tokens: 0,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd: 0,
    }
    m.calls += 1
    m.input_tokens += usage.input_tokens
    m.output_tokens += usage.output_tokens
    m.cache_read_tokens += usage.cache_read_input_tokens
    m.cache_write_tokens += usage.cache_creation_input_tokens
    m.cost_usd += costOf(model, usage)
    this.byModel.set(model, m)
  }

  /** The figures so far; input tokens count cache reads and writes, as the result's always did. */
  usage(): MeteredUsage {
    const model_usage = [...this.byModel.values()].map((m) => ({ ...m }))
    const sum = (f: (m: RunnerModelUsage) => number) => model_usage.reduce((n, m) => n + f(m), 0)
    return {
      input_tokens: sum((m) => m.input_tokens + m.cache_read_tokens + m.cache_write_tokens),
      output_tokens: sum((m) => m.output_tokens),
      cost_usd: sum((m) => m.cost_usd),
      model_usage,
    }
  }
}
