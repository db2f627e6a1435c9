/**
 * The model gateway's providers: for each grant, the one its credential names. The
 * gateway owns one {@link GatewayProviders}, which keeps what outlives a request (Vertex's
 * access tokens).
 */
import type { GatewayGrant } from '@berth/core'
import { anthropicProvider } from './anthropic.js'
import { bedrockProvider } from './bedrock.js'
import type { UpstreamProvider } from './types.js'
import { vertexProvider } from './vertex.js'
import { accessTokens } from './vertex-token.js'

export { GATEWAY_ROUTES } from './anthropic.js'
export type { GatewayRoute, UpstreamProvider } from './types.js'

/** Providers by grant, sharing one token cache. */
export interface GatewayProviders {
  /** The provider a grant's credential reaches. */
  for(grant: GatewayGrant): UpstreamProvider
}

/**
 * The gateway's providers: `anthropic`, `bedrock` (SigV4) and `vertex` (minted tokens).
 *
 * @example
 * ```ts
 * const providers = gatewayProviders()
 * const matched = providers.for(grant).match('POST', '/v1/messages')
 * ```
 */
export function gatewayProviders(): GatewayProviders {
  const tokens = accessTokens()
  return {
    for(grant) {
      const upstream = grant.upstream
      const map = grant.model_map ?? {}
      if (upstream.provider === 'bedrock') return bedrockProvider(upstream, map)
      if (upstream.provider === 'vertex') return vertexProvider(upstream, map, tokens)
      return anthropicProvider(upstream)
    },
  }
}
