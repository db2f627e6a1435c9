/**
 * What a model answer costs, from the usage the provider returned. The model gateway sums
 * these per task to enforce its budget, so the table errs on the dear side: a model it does
 * not know is priced as the dearest family.
 */
import { modelAllowed } from '@berth/core'

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

/** The context window, in tokens: what a prompt can hold at most. */
export const CONTEXT_WINDOW = 200_000
/** The context window of a request with the `context-1m` beta. */
export const LONG_CONTEXT_WINDOW = 1_000_000

/**
 * The most a Messages request can cost before its answer says more: a prompt filling the
 * context window (every token priced as a cache write, a one-hour one when the request
 * asks for that lifetime) and `max_tokens` of output. A prompt's size in bytes is no bound
 * (a small PDF renders to many tokens, a server tool's results join the prompt); the
 * context window is. `body` is the request as the gateway forwards it.
 *
 * @example
 * ```ts
 * worstCostOf('claude-haiku-4-5', 1000, '{"max_tokens":1000}', undefined) // (200k × 1.25 + 1000 × 5) / 1M = 0.255
 * ```
 */
export function worstCostOf(model: string, maxTokens: number, body: string, beta: string | undefined): number {
  const p = priceOf(model) ?? UNKNOWN_MODEL_PRICE
  const window = beta?.includes('context-1m') ? LONG_CONTEXT_WINDOW : CONTEXT_WINDOW
  const input = body.includes('"ttl":"1h"') ? p.cache_write_1h : p.cache_write_5m
  return (window * input + Math.min(maxTokens, window) * p.output) / 1_000_000
}
