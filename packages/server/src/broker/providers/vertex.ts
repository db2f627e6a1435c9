/**
 * Google Vertex AI. Claude Code, with `CLAUDE_CODE_USE_VERTEX` and Google sign-in skipped,
 * calls `POST /v1/projects/<p>/locations/<r>/publishers/anthropic/models/<m>:streamRawPredict`
 * (`:rawPredict` unstreamed; model `count-tokens` to count) on the gateway; the gateway
 * checks the model, forwards to the credential's own project and region with Vertex's id
 * for the model, and authorizes with an access token it minted from the service account's
 * key (`vertex-token.ts`). Answers are the Messages API's, SSE or JSON.
 */
import type { VertexUpstream } from '@berth/core'
import { forwardedHeaders } from '../gateway-http.js'
import { messagesUsageReader } from './anthropic.js'
import { anthropicNamed, profileModelId, providerModelId } from './model-ids.js'
import type { GatewayRoute, UpstreamProvider } from './types.js'
import { TokenRefused, type AccessTokens } from './vertex-token.js'

const PREDICT =
  /^\/v1\/projects\/[^/]+\/locations\/[^/]+\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/
const PREDICT_ROUTE: GatewayRoute = { method: 'POST', path: PREDICT, checksModel: true, metered: true }
/** `models/count-tokens:rawPredict`: the model is the body's, and nothing is metered. */
const COUNT_ROUTE: GatewayRoute = { method: 'POST', path: PREDICT, checksModel: true, metered: false }
const COUNT_TOKENS = 'count-tokens'

function pathModel(pathname: string): { id: string; action: string } | null {
  const m = PREDICT.exec(pathname)
  if (!m) return null
  try {
    return { id: decodeURIComponent(m[1]!), action: m[2]! }
  } catch {
    return null
  }
}

/** A path segment as Vertex's ids spell it (`claude-sonnet-4-5@20250929`: the `@` stays). */
const segment = (s: string) => encodeURIComponent(s).replace(/%40/g, '@')

/** The token endpoint's refusal, as Claude Code reads a provider's error. */
function refused(upstream: VertexUpstream, err: TokenRefused): Response {
  const server = err.status >= 500
  const message = `Berth model gateway: Vertex AI's token endpoint refused service account ${upstream.service_account.client_email}: ${err.detail}`
  return Response.json(
    { type: 'error', error: { type: server ? 'api_error' : 'authentication_error', message } },
    { status: server ? 502 : 401 },
  )
}

/**
 * The provider of a `vertex` credential: requests to the credential's project and region
 * at `https://<region>-aiplatform.googleapis.com/v1` (or its `base_url`) with a minted
 * access token; a token Vertex refuses (401) is dropped and the request sent once more
 * with a new one.
 *
 * @example
 * ```ts
 * const provider = vertexProvider(grant.upstream, grant.model_map ?? {}, accessTokens())
 * ```
 */
export function vertexProvider(
  upstream: VertexUpstream,
  map: Readonly<Record<string, string>>,
  tokens: AccessTokens,
): UpstreamProvider {
  const base = upstream.base_url.replace(/\/+$/, '')
  return {
    match(method, pathname) {
      const sent = method === 'POST' ? pathModel(pathname) : null
      if (!sent) return null
      if (sent.id === COUNT_TOKENS) return sent.action === 'rawPredict' ? { route: COUNT_ROUTE } : null
      return { route: PREDICT_ROUTE, model: profileModelId(sent.id, map) }
    },
    async send(req, fetch) {
      const sent = pathModel(req.url.pathname)!
      const counting = sent.id === COUNT_TOKENS
      let body = req.body
      if (counting && body !== undefined && req.model !== undefined) {
        // Counting names its model in the body, which Vertex reads by its own id.
        body = JSON.stringify({ ...JSON.parse(body), model: providerModelId(req.model, req.model, map) })
      }
      const model = counting ? COUNT_TOKENS : providerModelId(req.model, sent.id, map)
      const url = `${base}/projects/${segment(upstream.project_id)}/locations/${segment(upstream.region)}/publishers/anthropic/models/${segment(model)}:${sent.action}`
      const attempt = async () => {
        const token = await tokens.get(upstream.service_account, fetch)
        const headers = forwardedHeaders(req.headers)
        headers.set('authorization', `Bearer ${token}`)
        const res = await fetch(url, { method: req.method, headers, body, redirect: 'manual', signal: req.signal })
        return { res, token }
      }
      try {
        const first = await attempt()
        if (first.res.status !== 401) return first.res
        // Revoked or expired sooner than it said: one more try with a token minted now.
        await first.res.body?.cancel()
        tokens.drop(upstream.service_account, first.token)
        return (await attempt()).res
      } catch (err) {
        if (err instanceof TokenRefused) return refused(upstream, err)
        throw err
      }
    },
    usageReader: (contentType) => anthropicNamed(messagesUsageReader(contentType)),
  }
}
