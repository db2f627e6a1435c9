/**
 * Model ids as Bedrock and Vertex AI name them. A profile names a model as the Anthropic
 * API does (`claude-sonnet-4-5`); the model gateway asks the provider for the id mapped
 * here, laid under the credential's own `model_map`. docs/CREDENTIALS.md lists the table.
 */
import type { ModelProvider } from '@berth/contract'

/** Anthropic's id → the snapshot date that Bedrock's and Vertex's ids carry. */
const SNAPSHOTS: Readonly<Record<string, string>> = {
  'claude-opus-4-5': '20251101',
  'claude-sonnet-4-5': '20250929',
  'claude-haiku-4-5': '20251001',
  'claude-opus-4-1': '20250805',
  'claude-sonnet-4': '20250514',
}

/**
 * Bedrock's cross-region inference profiles are named by geography (`us.`, `eu.`,
 * `apac.`, `us-gov.`); a region outside them gets the base model id, which a
 * `model_map` should replace with what the account may invoke.
 */
function bedrockGeography(region: string): string {
  if (region.startsWith('us-gov-')) return 'us-gov.'
  if (region.startsWith('us-')) return 'us.'
  if (region.startsWith('eu-')) return 'eu.'
  if (region.startsWith('ap-')) return 'apac.'
  return ''
}

/**
 * Berth's default map for a provider and region: each known model, by its alias and its
 * dated id, to the provider's id (`{}` for `anthropic` and `stub`, which take the ids as they are).
 *
 * @example
 * ```ts
 * defaultModelMap('bedrock', 'eu-west-1')['claude-sonnet-4-5'] // 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0'
 * defaultModelMap('vertex', 'us-east5')['claude-sonnet-4-5'] // 'claude-sonnet-4-5@20250929'
 * ```
 */
export function defaultModelMap(provider: ModelProvider, region: string | null): Record<string, string> {
  if (provider !== 'bedrock' && provider !== 'vertex') return {}
  const map: Record<string, string> = {}
  for (const [alias, date] of Object.entries(SNAPSHOTS)) {
    const id =
      provider === 'bedrock' ? `${bedrockGeography(region ?? '')}anthropic.${alias}-${date}-v1:0` : `${alias}@${date}`
    map[alias] = id
    map[`${alias}-${date}`] = id
  }
  return map
}

/**
 * The map a credential uses: Berth's defaults with the credential's `model_map` laid over them.
 *
 * @example
 * ```ts
 * modelMapOf('vertex', 'global', { 'claude-sonnet-4-5': 'claude-sonnet-4-5@20251201' })['claude-sonnet-4-5']
 * // 'claude-sonnet-4-5@20251201'
 * ```
 */
export function modelMapOf(
  provider: ModelProvider,
  region: string | null,
  overrides: Readonly<Record<string, string>> | null,
): Record<string, string> {
  return { ...defaultModelMap(provider, region), ...overrides }
}
