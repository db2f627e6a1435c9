/**
 * The Anthropic API (or an Anthropic-compatible endpoint): the agent's requests go to the
 * credential's base URL as they came, with the real key in `x-api-key`.
 */
import type { AnthropicUpstream } from '@berth/core'
import { upstreamHeaders } from '../gateway-http.js'
import { jsonUsageReader, sseUsageReader, type SseMeter, type UsageReader } from '../gateway-usage.js'
import type { GatewayRoute, UpstreamProvider } from './types.js'

/**
 * The requests the gateway forwards to the Anthropic API; anything else is a 404. Kept to
 * what Claude Code needs: batches, files and other endpoints would spend the caller's key
 * on work the gateway cannot meter or check.
 */
export const GATEWAY_ROUTES: readonly GatewayRoute[] = [
  { method: 'POST', path: /^\/v1\/messages$/, checksModel: true, metered: true },
  { method: 'POST', path: /^\/v1\/messages\/count_tokens$/, checksModel: true, metered: false },
  { method: 'GET', path: /^\/v1\/models$/, checksModel: false, metered: false },
  { method: 'GET', path: /^\/v1\/models\/[\w.:@-]+$/, checksModel: false, metered: false },
]

/**
 * A usage reader by content type: `text/event-stream` is a streamed answer, anything else
 * a whole JSON one (Vertex answers the same way).
 *
 * @example
 * ```ts
 * const reader = messagesUsageReader(upstream.headers.get('content-type'))
 * ```
 */
export function messagesUsageReader(contentType: string | null): UsageReader | SseMeter {
  return contentType?.startsWith('text/event-stream') ? sseUsageReader() : jsonUsageReader()
}

/**
 * The provider of an `anthropic` credential.
 *
 * @example
 * ```ts
 * const provider = anthropicProvider({ base_url: 'https://api.anthropic.com', api_key: key })
 * ```
 */
export function anthropicProvider(upstream: AnthropicUpstream): UpstreamProvider {
  return {
    match(method, pathname) {
      const route = GATEWAY_ROUTES.find((r) => r.method === method && r.path.test(pathname))
      return route ? { route } : null
    },
    send(req, fetch) {
      return fetch(`${upstream.base_url.replace(/\/+$/, '')}${req.url.pathname}${req.url.search}`, {
        method: req.method,
        headers: upstreamHeaders(req.headers, upstream.api_key),
        body: req.body,
        // A redirect would carry the key to wherever it points: hand it to the client instead.
        redirect: 'manual',
        signal: req.signal,
      })
    },
    usageReader: messagesUsageReader,
  }
}
