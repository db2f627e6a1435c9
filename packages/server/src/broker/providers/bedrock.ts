/**
 * Amazon Bedrock. Claude Code, with `CLAUDE_CODE_USE_BEDROCK` and its own signing skipped,
 * calls `POST /model/<id>/invoke` and `/invoke-with-response-stream` on the gateway; the
 * gateway checks the model the path names, asks Bedrock for the credential's id of it, and
 * signs the request with SigV4 for service `bedrock` (`@smithy/signature-v4`, as the AWS
 * SDK does). A streamed answer is AWS event-stream framing whose chunks carry the
 * Messages API's events; `bedrock-stream.ts` reads usage out of them.
 */
import { Hash } from '@smithy/hash-node'
import { SignatureV4 } from '@smithy/signature-v4'
import type { BedrockUpstream } from '@berth/core'
import { jsonUsageReader } from '../gateway-usage.js'
import { eventStreamUsageReader } from './bedrock-stream.js'
import { anthropicNamed, profileModelId, providerModelId } from './model-ids.js'
import type { GatewayRoute, UpstreamProvider } from './types.js'

type SignableRequest = Parameters<SignatureV4['sign']>[0]

/** Bedrock runtime's Messages API routes: the model is a path segment. */
const INVOKE = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/
const ROUTE: GatewayRoute = { method: 'POST', path: INVOKE, checksModel: true, metered: true }

/** The client headers Bedrock reads; nothing else is signed or sent. */
const FORWARDED = (name: string) => name === 'content-type' || name === 'accept' || name.startsWith('x-amzn-bedrock-')

function pathModel(pathname: string): { id: string; action: string } | null {
  const m = INVOKE.exec(pathname)
  if (!m) return null
  try {
    return { id: decodeURIComponent(m[1]!), action: m[2]! }
  } catch {
    return null
  }
}

/**
 * The provider of a `bedrock` credential: SigV4-signed requests to
 * `https://bedrock-runtime.<region>.amazonaws.com` (or the credential's `base_url`).
 *
 * @example
 * ```ts
 * const provider = bedrockProvider(grant.upstream, grant.model_map ?? {})
 * ```
 */
export function bedrockProvider(upstream: BedrockUpstream, map: Readonly<Record<string, string>>): UpstreamProvider {
  const signer = new SignatureV4({
    service: 'bedrock',
    region: upstream.region,
    credentials: {
      accessKeyId: upstream.access_key_id,
      secretAccessKey: upstream.secret_access_key,
      ...(upstream.session_token && { sessionToken: upstream.session_token }),
    },
    sha256: Hash.bind(null, 'sha256'),
  })
  const base = new URL(upstream.base_url)
  return {
    match(method, pathname) {
      const sent = method === ROUTE.method ? pathModel(pathname) : null
      return sent ? { route: ROUTE, model: profileModelId(sent.id, map) } : null
    },
    async send(req, fetch) {
      const sent = pathModel(req.url.pathname)!
      const id = providerModelId(req.model, sent.id, map)
      // Encoded as the AWS SDK does; the signer encodes the path once more for its canonical form.
      const path = `${base.pathname.replace(/\/+$/, '')}/model/${encodeURIComponent(id)}/${sent.action}`
      const headers: Record<string, string> = { host: base.host }
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === 'string' && FORWARDED(name)) headers[name] = value
      const request: SignableRequest = {
        method: req.method,
        protocol: base.protocol,
        hostname: base.hostname,
        ...(base.port && { port: Number(base.port) }),
        path,
        query: {},
        headers,
        body: req.body,
      }
      const signed = await signer.sign(request)
      // fetch sets Host from the URL, the same value as the one signed.
      const { host: _host, ...sendHeaders } = signed.headers
      return fetch(new URL(path, base), {
        method: req.method,
        headers: sendHeaders,
        body: req.body,
        redirect: 'manual',
        signal: req.signal,
      })
    },
    usageReader: (contentType) =>
      anthropicNamed(
        contentType?.startsWith('application/vnd.amazon.eventstream') ? eventStreamUsageReader() : jsonUsageReader(),
      ),
  }
}
