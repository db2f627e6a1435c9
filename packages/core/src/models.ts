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

/**
 * True when `model` matches one of the patterns (`*` matches any run of characters), or
 * when there is no allow-list (`null`).
 *
 * @example
 * ```ts
 * modelAllowed('claude-sonnet-4-5', ['claude-sonnet-*']) // true
 * ```
 */
export function modelAllowed(model: string, patterns: readonly string[] | null): boolean {
  if (patterns === null) return true
  return patterns.some((p) => {
    const re = new RegExp(
      `^${p
        .split('*')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    )
    return re.test(model)
  })
}
