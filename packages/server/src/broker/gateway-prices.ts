/** The gateway prices answers with the contract's table, the same one a runner without the gateway uses. */
export {
  costOf,
  emptyUsage,
  mergeUsage,
  MODEL_PRICES,
  priceOf,
  UNKNOWN_MODEL_PRICE,
  WEB_SEARCH_PRICE_USD,
  type ModelPrice,
  type TokenUsage,
} from '@berth/core'
import { priceOf, UNKNOWN_MODEL_PRICE } from '@berth/core'

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
