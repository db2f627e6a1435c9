/**
 * Model ids between a profile and a provider. A profile names models as the Anthropic API
 * does (`claude-sonnet-4-5`); the grant's `model_map` gives Bedrock's or Vertex's id for
 * each. The gateway checks `allowed_models` and prices answers on the profile's names, so
 * an id the agent sends in the provider's form is read back to that form first.
 */
import type { AnswerUsage, SseMeter, UsageReader } from '../gateway-usage.js'

/**
 * A provider's model id as the Anthropic API would name it: Bedrock's `[geo.]anthropic.`
 * prefix and `-v1:0` suffix dropped, Vertex's `@date` joined with a dash.
 *
 * @example
 * ```ts
 * anthropicModelId('us.anthropic.claude-sonnet-4-5-20250929-v1:0') // 'claude-sonnet-4-5-20250929'
 * anthropicModelId('claude-haiku-4-5@20251001') // 'claude-haiku-4-5-20251001'
 * ```
 */
export function anthropicModelId(id: string): string {
  return id
    .replace(/^(?:[a-z-]+\.)?anthropic\./, '')
    .replace(/-v\d+(?::\d+)?$/, '')
    .replace(/@(\d{8})$/, '-$1')
}

/**
 * The model a request names, as a profile names it: the map's first key for a provider
 * id it lists, else the id read as {@link anthropicModelId}.
 *
 * @example
 * ```ts
 * profileModelId('eu.anthropic.claude-haiku-4-5-20251001-v1:0', { 'claude-haiku-4-5': 'eu.anthropic.claude-haiku-4-5-20251001-v1:0' })
 * // 'claude-haiku-4-5'
 * ```
 */
export function profileModelId(id: string, map: Readonly<Record<string, string>>): string {
  if (id in map) return id
  for (const [name, mapped] of Object.entries(map)) if (mapped === id) return name
  return anthropicModelId(id)
}

/**
 * The id to ask the provider for: the map's id for the checked model, else the id the agent sent.
 *
 * @example
 * ```ts
 * providerModelId('claude-sonnet-4-5', 'claude-sonnet-4-5', { 'claude-sonnet-4-5': 'claude-sonnet-4-5@20250929' })
 * // 'claude-sonnet-4-5@20250929'
 * ```
 */
export function providerModelId(checked: string | undefined, sent: string, map: Readonly<Record<string, string>>) {
  return (checked !== undefined && map[checked]) || sent
}

/**
 * A usage reader (or stream meter) whose answer names its model as the Anthropic API would
 * (a provider may report its own id), so prices, budgets and metrics read one name per
 * model whatever the provider.
 *
 * @example
 * ```ts
 * const reader = anthropicNamed(eventStreamUsageReader())
 * ```
 */
export function anthropicNamed<R extends UsageReader | SseMeter>(reader: R): R {
  const named = (answer: AnswerUsage | undefined) =>
    answer && { ...answer, model: answer.model && anthropicModelId(answer.model) }
  const meter = 'now' in reader ? { now: () => named(reader.now()) } : {}
  return { ...reader, ...meter, end: () => named(reader.end()) }
}
