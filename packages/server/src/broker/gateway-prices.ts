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
