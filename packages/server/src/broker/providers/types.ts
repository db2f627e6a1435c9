/**
 * What the model gateway needs to know of a provider: which requests it forwards and the
 * model each names, how a checked request reaches the provider (its URL, its signature or
 * token), and how to read usage out of its answers. One implementation per provider:
 * `anthropic.ts`, `bedrock.ts`, `vertex.ts`.
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { SseMeter, UsageReader } from '../gateway-usage.js'

/** A request the gateway forwards: its method and path, whether it names a model, whether its answer is metered. */
export interface GatewayRoute {
  method: string
  path: RegExp
  checksModel: boolean
  metered: boolean
}

/** A request the gateway matched to a route. */
export interface MatchedRequest {
  route: GatewayRoute
  /**
   * The model the path names, as a profile names it (Bedrock and Vertex put the model in
   * the path); undefined when the body's `model` names it (the Anthropic API).
   */
  model?: string
}

/** A checked request, ready to forward. */
export interface ForwardedRequest {
  method: string
  /** The path and query the agent asked for. */
  url: URL
  /** The model the gateway checked (as a profile names it), when the route names one. */
  model: string | undefined
  headers: IncomingHttpHeaders
  /** The body the gateway checked, re-serialised. */
  body: string | undefined
  signal: AbortSignal
}

/** One provider, bound to one grant's upstream. */
export interface UpstreamProvider {
  /** The route a request takes, or null: the gateway answers 404 and forwards nothing. */
  match(method: string, pathname: string): MatchedRequest | null
  /**
   * Send a checked request to the provider, authenticated for it. Never follows a redirect
   * (it would carry the credential along). A refusal the provider's own authentication
   * gave before the request (Vertex's token endpoint) is answered here, in Anthropic's
   * error shape.
   */
  send(req: ForwardedRequest, fetch: typeof globalThis.fetch): Promise<Response>
  /**
   * A reader of the usage in an answer with this content type, as Anthropic stream events
   * carry it; for a stream, a meter that splits it into whole events (so a budget can end
   * it between two).
   */
  usageReader(contentType: string | null): UsageReader | SseMeter
}
