/**
 * The model gateway: the only way a task's agent reaches its model. It listens on a unix
 * socket that containers see through a bind mount, takes a per-task capability token where
 * the agent would put its API key, and holds the real key itself: it checks the token and
 * the credential's `allowed_models` on every request, injects the key, streams the
 * provider's answer back unchanged, and meters tokens and cost from what the provider
 * returned, so a task's budget holds between one model call and the next.
 */
import { unlink } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { modelAllowed, type GatewayGrant } from '@berth/core'
import { writeAnswerHead } from '../upstream-answer.js'
import { BodyTooLarge, downstreamHeaders, readBody, sendError, tokenOf, upstreamHeaders } from './gateway-http.js'
import { costOf, priceOf } from './gateway-prices.js'
import { listenOnSocket } from './socket.js'
import { modelCallSpan } from './gateway-trace.js'
import { jsonUsageReader, sseUsageReader, type AnswerUsage, type UsageReader } from './gateway-usage.js'

/**
 * What a capability token grants: one task's access to one credential (core's
 * `RunGrants.gateway` answers it). `max_budget_usd` is checked before each model call
 * against what the task's answers cost so far (this gateway's totals), and
 * `monthly_budget_exceeded` (the caller's or profile's monthly limit, from the shared
 * ledger) likewise; a call under way is not cut, so calls running at the same time can
 * pass a limit by what they cost.
 */
export type { GatewayGrant }

/** The usage and cost of one answer, as the provider reported it. */
export interface ModelUsage {
  model: string
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  web_search_requests: number
  cost_usd: number
}

/** One task's usage so far: every metered answer summed. */
export interface GatewayUsageTotals extends Omit<ModelUsage, 'model'> {
  /** Answers that reported usage. */
  requests: number
}

/** When a metered model call ran: from the request's arrival to its answer's end. */
export interface ModelCallTiming {
  /** Epoch milliseconds when the gateway took the request. */
  started_at: number
  /** Epoch milliseconds when the answer ended (streamed to its end, or cut). */
  ended_at: number
}

/** Options of {@link startModelGateway}. */
export interface ModelGatewayOptions {
  /** Listen here. A stale socket file is replaced; the socket is made world-writable (mode 0666), as the agent's user is not root and the token is the authentication. */
  socketPath: string
  /** The grant behind a token, or null (answered 401). Asked on every request: nothing is cached. */
  authorize(token: string): Promise<GatewayGrant | null>
  /** Called after each metered answer from the provider, streamed or not. */
  onUsage?(grant: GatewayGrant, usage: ModelUsage, timing: ModelCallTiming): void
  /** The fetch used upstream (default: the global one). */
  fetch?: typeof fetch
  /** Largest request body accepted, in bytes (default {@link GATEWAY_BODY_LIMIT}). */
  maxBodyBytes?: number
  logger?: { warn(msg: string, fields?: object): void }
}

/** A running gateway. */
export interface ModelGateway {
  socketPath: string
  /** A task's usage so far, or undefined when nothing was metered for it. */
  usage(taskId: string): GatewayUsageTotals | undefined
  /** Drop a task's totals (once its usage has been recorded elsewhere). */
  forget(taskId: string): void
  /** Stop listening, end open streams and remove the socket file. */
  close(): Promise<void>
}

/** Request bodies above 32 MiB are refused (413), as Anthropic's API refuses them. */
export const GATEWAY_BODY_LIMIT = 32 << 20

/**
 * The requests the gateway forwards; anything else is a 404. Kept to what Claude Code
 * needs: batches, files and other endpoints would spend the caller's key on work the
 * gateway cannot meter or check.
 */
export const GATEWAY_ROUTES: readonly { method: string; path: RegExp; checksModel: boolean; metered: boolean }[] = [
  { method: 'POST', path: /^\/v1\/messages$/, checksModel: true, metered: true },
  { method: 'POST', path: /^\/v1\/messages\/count_tokens$/, checksModel: true, metered: false },
  { method: 'GET', path: /^\/v1\/models$/, checksModel: false, metered: false },
  { method: 'GET', path: /^\/v1\/models\/[\w.:@-]+$/, checksModel: false, metered: false },
]

const PREFIX = 'Berth model gateway'

function emptyTotals(): GatewayUsageTotals {
  return {
    requests: 0,
    input_tokens: 0,
    output_tokens: 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    web_search_requests: 0,
    cost_usd: 0,
  }
}

/** Resolves once the client can take more bytes, or has gone. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

/**
 * Start the model gateway on a unix socket. Point the agent's `ANTHROPIC_BASE_URL` at it
 * (through a forwarder when the agent cannot dial a socket) and give it a capability token
 * as `ANTHROPIC_API_KEY`; `authorize` turns that token into the task's grant.
 *
 * @example
 * ```ts
 * const gateway = await startModelGateway({
 *   socketPath: '/run/berth/model.sock',
 *   authorize: async (token) => grants.get(token) ?? null,
 *   onUsage: (grant, usage) => console.log(grant.task_id, usage.cost_usd),
 * })
 * // ... later
 * gateway.usage('task_123') // { requests: 3, input_tokens: 1200, ..., cost_usd: 0.0123 }
 * await gateway.close()
 * ```
 */
export async function startModelGateway(o: ModelGatewayOptions): Promise<ModelGateway> {
  const upstreamFetch = o.fetch ?? fetch
  const maxBody = o.maxBodyBytes ?? GATEWAY_BODY_LIMIT
  const totals = new Map<string, GatewayUsageTotals>()
  const unpriced = new Set<string>()

  const record = (
    grant: GatewayGrant,
    requested: string | undefined,
    answer: AnswerUsage,
    startedAt: number,
  ): ModelUsage => {
    const model = answer.model ?? requested ?? 'unknown'
    if (!priceOf(model) && !unpriced.has(model)) {
      unpriced.add(model)
      o.logger?.warn(`${PREFIX}: no price for model ${model}; metered at the dearest rate`, { model })
    }
    const u = answer.usage
    const usage: ModelUsage = {
      model,
      input_tokens: u.input_tokens,
      output_tokens: u.output_tokens,
      cache_creation_input_tokens: u.cache_creation_input_tokens,
      cache_read_input_tokens: u.cache_read_input_tokens,
      web_search_requests: u.web_search_requests ?? 0,
      cost_usd: costOf(model, u),
    }
    const sum = totals.get(grant.task_id) ?? emptyTotals()
    sum.requests += 1
    sum.input_tokens += usage.input_tokens
    sum.output_tokens += usage.output_tokens
    sum.cache_creation_input_tokens += usage.cache_creation_input_tokens
    sum.cache_read_input_tokens += usage.cache_read_input_tokens
    sum.web_search_requests += usage.web_search_requests
    sum.cost_usd += usage.cost_usd
    totals.set(grant.task_id, sum)
    try {
      o.onUsage?.(grant, usage, { started_at: startedAt, ended_at: Date.now() })
    } catch (err) {
      o.logger?.warn(`${PREFIX}: onUsage failed`, { task_id: grant.task_id, error: String(err) })
    }
    return usage
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const startedAt = Date.now()
    const token = tokenOf(req.headers)
    const grant = token ? await o.authorize(token) : null
    if (!grant) {
      req.resume()
      return sendError(res, 401, 'authentication_error', `${PREFIX}: missing, unknown or expired token`)
    }
    const url = new URL(req.url ?? '/', 'http://gateway')
    const span = modelCallSpan(grant, req.method ?? 'GET', url.pathname)
    res.once('close', () => span.end(res.statusCode))
    const route = GATEWAY_ROUTES.find((r) => r.method === req.method && r.path.test(url.pathname))
    if (!route) {
      req.resume()
      return sendError(res, 404, 'not_found_error', `${PREFIX}: not found: ${req.method} ${url.pathname}`)
    }
    const spent = totals.get(grant.task_id)?.cost_usd ?? 0
    if (route.metered && grant.max_budget_usd !== null && spent >= grant.max_budget_usd) {
      req.resume()
      // 400 like the provider's own "credit balance is too low": clients do not retry it, as they would a 429.
      return sendError(
        res,
        400,
        'invalid_request_error',
        `${PREFIX}: this task's budget of $${grant.max_budget_usd} is spent ($${spent.toFixed(4)} used)`,
      )
    }
    const monthly = grant.monthly_budget_exceeded
    if (route.metered && monthly) {
      req.resume()
      const whose = monthly.scope === 'user' ? "the caller's" : "the profile's"
      return sendError(
        res,
        400,
        'invalid_request_error',
        `${PREFIX}: ${whose} monthly spending limit of $${monthly.limit} is spent ($${monthly.spent.toFixed(4)} this month)`,
      )
    }

    let body: string | undefined
    let requested: string | undefined
    if (req.method === 'POST') {
      let parsed: unknown
      try {
        parsed = JSON.parse((await readBody(req, maxBody)).toString('utf8'))
      } catch (err) {
        if (err instanceof BodyTooLarge)
          return sendError(res, 413, 'request_too_large', `${PREFIX}: request body over ${maxBody} bytes`)
        return sendError(res, 400, 'invalid_request_error', `${PREFIX}: request body is not valid JSON`)
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        return sendError(res, 400, 'invalid_request_error', `${PREFIX}: request body must be a JSON object`)
      const model = (parsed as { model?: unknown }).model
      if (route.checksModel) {
        if (typeof model !== 'string')
          return sendError(res, 400, 'invalid_request_error', `${PREFIX}: model: a model name is required`)
        if (!modelAllowed(model, grant.allowed_models))
          return sendError(
            res,
            403,
            'permission_error',
            `${PREFIX}: model ${model} is not allowed for this credential (allowed: ${grant.allowed_models?.join(', ')})`,
          )
        requested = model
        span.model(model, route.metered)
      }
      // The provider gets the body the gateway checked, re-serialised: a duplicate "model"
      // key or an escaped one could otherwise read differently to another JSON parser.
      body = JSON.stringify(parsed)
    } else {
      req.resume()
    }

    const abort = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) abort.abort()
    })
    let upstream: Response
    try {
      upstream = await upstreamFetch(`${grant.upstream.base_url.replace(/\/+$/, '')}${url.pathname}${url.search}`, {
        method: req.method,
        headers: upstreamHeaders(req.headers, grant.upstream.api_key),
        body,
        // A redirect would carry the key to wherever it points: hand it to the client instead.
        redirect: 'manual',
        signal: abort.signal,
      })
    } catch (err) {
      if (abort.signal.aborted) return
      o.logger?.warn(`${PREFIX}: upstream unreachable`, { task_id: grant.task_id, error: String(err) })
      return sendError(res, 502, 'api_error', `${PREFIX}: the model provider could not be reached`)
    }

    if (!writeAnswerHead(res, upstream.status, downstreamHeaders(upstream.headers))) {
      await upstream.body?.cancel().catch(() => {})
      return sendError(res, 502, 'api_error', `${PREFIX}: the model provider answered with status ${upstream.status}`)
    }
    res.flushHeaders()
    let reader: UsageReader | undefined
    if (route.metered && upstream.ok) {
      const sse = upstream.headers.get('content-type')?.startsWith('text/event-stream')
      reader = sse ? sseUsageReader() : jsonUsageReader()
    }
    try {
      const chunks = upstream.body?.getReader()
      while (chunks) {
        const { done, value } = await chunks.read()
        if (done) break
        if (res.destroyed) {
          await chunks.cancel()
          break
        }
        // The client gets the bytes first; metering reads them after.
        if (!res.write(value)) await drained(res)
        reader?.push(value)
      }
      res.end()
    } catch (err) {
      if (!abort.signal.aborted)
        o.logger?.warn(`${PREFIX}: upstream stream failed`, { task_id: grant.task_id, error: String(err) })
      res.destroy()
    } finally {
      // What was streamed before a disconnect is billed by the provider, so it is metered too.
      const answer = reader?.end()
      if (answer) span.usage(record(grant, requested, answer, startedAt))
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      o.logger?.warn(`${PREFIX}: request failed`, { error: String(err) })
      sendError(res, 500, 'api_error', `${PREFIX}: internal error`)
    })
  })
  await listenOnSocket(server, o.socketPath, PREFIX)

  return {
    socketPath: o.socketPath,
    usage: (taskId) => {
      const sum = totals.get(taskId)
      return sum ? { ...sum } : undefined
    },
    forget: (taskId) => {
      totals.delete(taskId)
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          unlink(o.socketPath).then(resolve, () => resolve())
        })
        server.closeAllConnections()
      }),
  }
}
