/**
 * What a model answer costs, from the usage the provider returned: the one price table
 * behind every `cost_usd` Berth reports. The model gateway prices each answer it forwards
 * with it (and sums them per task to enforce budgets); a runner that reaches its model
 * without the gateway (provider `stub`, the broker turned off) prices its own calls with
 * the same table. It errs on the dear side: a model it does not know is priced as the
 * dearest family.
 */
import { modelAllowed } from './models.js'

/** USD per million tokens of one model family (Anthropic's list prices). */
export interface ModelPrice {
  input: number
  output: number
  /** Writing the prompt cache with the default 5-minute lifetime (1.25 × input). */
  cache_write_5m: number
  /** Writing the prompt cache with the 1-hour lifetime (2 × input). */
  cache_write_1h: number
  /** Reading the prompt cache (0.1 × input). */
  cache_read: number
}

/** The token counts of one answer, as the Messages API reports them in `usage`. */
export interface TokenUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  /** How the cache writes split by lifetime, when the provider says; all 5-minute otherwise. */
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number }
  /** Server-side web searches the answer ran. */
  web_search_requests?: number
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0)

type UsageFields = Record<string, unknown> & {
  cache_creation?: Record<string, unknown> | null
  server_tool_use?: Record<string, unknown> | null
}

/**
 * No tokens yet: what an answer's usage starts from.
 *
 * @example
 * ```ts
 * emptyUsage().input_tokens // 0
 * ```
 */
export function emptyUsage(): TokenUsage {
  return { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

/**
 * Lay the fields present in `from` (a Messages API `usage` object) over `into`. Usage in
 * `message_delta` is cumulative (output tokens so far, and input and cache counts when the
 * provider updates them), so a later value replaces an earlier one rather than adding to
 * it. Anything that is not a positive finite number counts as 0.
 *
 * @example
 * ```ts
 * const usage = emptyUsage()
 * mergeUsage(usage, { input_tokens: 12, output_tokens: 1 }) // message_start
 * mergeUsage(usage, { output_tokens: 40 })                   // message_delta
 * usage // { input_tokens: 12, output_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
 * ```
 */
export function mergeUsage(into: TokenUsage, from: unknown): void {
  if (typeof from !== 'object' || from === null) return
  const u = from as UsageFields
  if ('input_tokens' in u) into.input_tokens = count(u.input_tokens)
  if ('output_tokens' in u) into.output_tokens = count(u.output_tokens)
  if ('cache_creation_input_tokens' in u) into.cache_creation_input_tokens = count(u.cache_creation_input_tokens)
  if ('cache_read_input_tokens' in u) into.cache_read_input_tokens = count(u.cache_read_input_tokens)
  if (u.cache_creation && typeof u.cache_creation === 'object') {
    into.cache_creation = {
      ephemeral_5m_input_tokens: count(u.cache_creation.ephemeral_5m_input_tokens),
      ephemeral_1h_input_tokens: count(u.cache_creation.ephemeral_1h_input_tokens),
    }
  }
  if (u.server_tool_use && typeof u.server_tool_use === 'object') {
    into.web_search_requests = count(u.server_tool_use.web_search_requests)
  }
}

const price = (input: number, output: number): ModelPrice => ({
  input,
  output,
  cache_write_5m: input * 1.25,
  cache_write_1h: input * 2,
  cache_read: input / 10,
})

/**
 * Anthropic's list prices per million tokens, checked against
 * https://docs.anthropic.com/en/docs/about-claude/pricing (November 2025). The first
 * pattern matching a model id wins (`*` matches any run of characters, as in
 * `allowed_models`), so versions priced apart from their family come first: Opus 4.5
 * costs a third of Opus 4 and 4.1, Haiku 4.5 more than Haiku 3.5. Sonnet's long-context
 * rate (prompts over 200k tokens, beta) and batch or priority tiers are not modelled: the
 * gateway forwards none of them at a discount, and a long-context request is priced at
 * the standard rate.
 */
export const MODEL_PRICES: readonly { pattern: string; price: ModelPrice }[] = [
  { pattern: 'claude-opus-4-5*', price: price(5, 25) },
  { pattern: 'claude-opus-4*', price: price(15, 75) },
  { pattern: 'claude-3-opus*', price: price(15, 75) },
  { pattern: 'claude-sonnet-4*', price: price(3, 15) },
  { pattern: 'claude-3-7-sonnet*', price: price(3, 15) },
  { pattern: 'claude-3-5-sonnet*', price: price(3, 15) },
  { pattern: 'claude-haiku-4*', price: price(1, 5) },
  { pattern: 'claude-3-5-haiku*', price: price(0.8, 4) },
  { pattern: 'claude-3-haiku*', price: price(0.25, 1.25) },
]

/** The price of a model the table does not know: the dearest row, so a budget is never undercounted. */
export const UNKNOWN_MODEL_PRICE: ModelPrice = price(15, 75)

/** USD per server-side web search ($10 per 1,000). */
export const WEB_SEARCH_PRICE_USD = 0.01

/**
 * The price row for a model id, or `undefined` when no row matches (callers then use
 * {@link UNKNOWN_MODEL_PRICE}).
 *
 * @example
 * ```ts
 * priceOf('claude-sonnet-4-5-20250929')?.input // 3
 * priceOf('gpt-4o') // undefined
 * ```
 */
export function priceOf(model: string): ModelPrice | undefined {
  return MODEL_PRICES.find((row) => modelAllowed(model, [row.pattern]))?.price
}

/**
 * The cost in USD of one answer: input, output, cache writes (split by lifetime when the
 * usage says) and cache reads at the model's price, plus web searches.
 *
 * @example
 * ```ts
 * costOf('claude-haiku-4-5', {
 *   input_tokens: 1_000_000, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0,
 * }) // 1
 * ```
 */
export function costOf(model: string, usage: TokenUsage): number {
  const p = priceOf(model) ?? UNKNOWN_MODEL_PRICE
  const written1h = Math.min(usage.cache_creation?.ephemeral_1h_input_tokens ?? 0, usage.cache_creation_input_tokens)
  const written5m = usage.cache_creation_input_tokens - written1h
  const perMillion =
    usage.input_tokens * p.input +
    usage.output_tokens * p.output +
    written5m * p.cache_write_5m +
    written1h * p.cache_write_1h +
    usage.cache_read_input_tokens * p.cache_read
  return perMillion / 1_000_000 + (usage.web_search_requests ?? 0) * WEB_SEARCH_PRICE_USD
}
