import type { ModelInfo, ModelProvider } from '@berth/contract'

/** A model a provider offers. */
export type CatalogModel = Omit<ModelInfo, 'provider' | 'provider_model_id'>

/**
 * The models Berth knows per provider. The `stub` provider (the offline model) accepts the
 * same ids as `anthropic`, so a profile can switch between them without changes. A
 * deployment can pass its own catalog to `createServices`.
 */
export const DEFAULT_MODELS: readonly CatalogModel[] = [
  { id: 'claude-opus-4-5', display_name: 'Claude Opus 4.5', context_window: 200_000, max_output_tokens: 64_000 },
  { id: 'claude-sonnet-4-5', display_name: 'Claude Sonnet 4.5', context_window: 200_000, max_output_tokens: 64_000 },
  { id: 'claude-haiku-4-5', display_name: 'Claude Haiku 4.5', context_window: 200_000, max_output_tokens: 64_000 },
  { id: 'claude-opus-4-1', display_name: 'Claude Opus 4.1', context_window: 200_000, max_output_tokens: 32_000 },
  { id: 'claude-sonnet-4', display_name: 'Claude Sonnet 4', context_window: 200_000, max_output_tokens: 64_000 },
]

/** Model catalog port: which models a provider offers. */
export interface ModelCatalog {
  models(provider: ModelProvider): readonly CatalogModel[]
}

/**
 * A catalog that offers the same models for every provider.
 *
 * @example
 * ```ts
 * const catalog = staticCatalog(DEFAULT_MODELS)
 * catalog.models('stub').length // 5
 * ```
 */
export function staticCatalog(models: readonly CatalogModel[] = DEFAULT_MODELS): ModelCatalog {
  return { models: () => models }
}

/** The SDK's model aliases for subagents: `inherit` (the main agent's) or a family name. */
const AGENT_ALIASES = new Set(['inherit', 'sonnet', 'opus', 'haiku'])

/**
 * True when an agent's (subagent's) `model` may run with a credential allowing the models
 * `allowed`: one of them, `inherit`, or a family alias with a model of that family among them.
 * Checked when an agent is saved and again when a task starts.
 *
 * @example
 * ```ts
 * agentModelAllowed('haiku', ['claude-haiku-4-5']) // true
 * agentModelAllowed('claude-opus-4-5', ['claude-haiku-4-5']) // false
 * ```
 */
export function agentModelAllowed(model: string, allowed: readonly string[]): boolean {
  if (model === 'inherit') return true
  if (AGENT_ALIASES.has(model)) return allowed.some((id) => id.includes(`-${model}-`) || id.endsWith(`-${model}`))
  return allowed.includes(model)
}
