/**
 * The model gateway: the only way a task's agent reaches its model. It listens on a unix
 * socket that containers see through a bind mount, takes a per-task capability token where
 * the agent would put its API key, and holds the real key itself: it checks the token and
 * the credential's `allowed_models` on every request, injects the key, streams the
 * provider's answer back unchanged, and meters tokens and cost from what the provider
 * returned. Budgets hold during a call: each call holds room in what its task's and its
 * caller's budgets have left (gateway-budget.ts), and a stream that would pass it is ended.
 */
import { unlink } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { modelAllowed, type GatewayGrant } from '@berth/core'
import { writeAnswerHead } from '../upstream-answer.js'
import { limitsOf, Reservations, spentMessage, type Hold } from './gateway-budget.js'
import { BodyTooLarge, downstreamHeaders, readBody, sendError, tokenOf } from './gateway-http.js'
import { costOf, priceOf, worstCostOf } from './gateway-prices.js'
import { relayAnswer, type StreamCheck } from './gateway-stream.js'
import { listenOnSocket } from './socket.js'
import { modelCallSpan } from './gateway-trace.js'
import type { AnswerUsage, UsageReader } from './gateway-usage.js'
import { gatewayProviders } from './providers/index.js'

/**
 * What a capability token grants: one task's access to one credential (core's
 * `RunGrants.gateway` answers it). `max_budget_usd` (against what the task's answers cost
 * so far, this gateway's totals) and `monthly_limits` (the caller's and the profile's,
 * against the shared ledger) hold during each model call: see {@link startModelGateway}.
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
  /**
   * Called after each metered answer from the provider, streamed or not. A promise it
   * returns says when the usage ledger has the call: monthly limits count the call apart
   * until then (anything else it returns is ignored).
   */
  onUsage?(grant: GatewayGrant, usage: ModelUsage, timing: ModelCallTiming): unknown
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

/** The requests the gateway forwards to the Anthropic API (Bedrock's and Vertex's are in `providers/`). */
export { GATEWAY_ROUTES } from './providers/index.js'

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

/**
 * Start the model gateway on a unix socket. Point the agent's `ANTHROPIC_BASE_URL` at it
 * (through a forwarder when the agent cannot dial a socket) and give it a capability token
 * as `ANTHROPIC_API_KEY`; `authorize` turns that token into the task's grant.
 *
 * A Messages call under a budget (the task's, the caller's or the profile's monthly one)
 * first holds its worst case (`worstCostOf`) in what that budget has left, or waits while
 * the calls under way hold it; once its prompt is metered it holds no more than its prompt
 * and `max_tokens` of output. A streamed answer is metered event by event as it passes (the
 * prompt when `message_start` reports it, the output from the provider's counts, else
 * estimated from the content) and ended with an `error` event at the first event that
 * would pass what is left. A call made once a budget is spent is refused with a 400.
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
  const book = new Reservations()
  const providers = gatewayProviders()

  /** At each event of a budget-held stream: hold its running cost, or end it there. */
  const budgetCheck =
    (hold: Hold, requested: string, maxTokens: number): StreamCheck =>
    (answer) => {
      const model = answer.model ?? requested
      const crossed = hold.charge(costOf(model, answer.usage))
      if (crossed) return { type: 'invalid_request_error', message: `${PREFIX}: ${spentMessage(crossed)}` }
      // Its prompt metered, the call holds no more than that and max_tokens of output.
      hold.shrink(costOf(model, { ...answer.usage, output_tokens: Math.max(maxTokens, answer.usage.output_tokens) }))
      return null
    }

  const record = (
    grant: GatewayGrant,
    requested: string | undefined,
    answer: AnswerUsage,
    startedAt: number,
  ): { usage: ModelUsage; written: Promise<unknown> | undefined } => {
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
    let written: Promise<unknown> | undefined
    try {
      const returned = o.onUsage?.(grant, usage, { started_at: startedAt, ended_at: Date.now() })
      if (returned instanceof Promise) written = returned
    } catch (err) {
      o.logger?.warn(`${PREFIX}: onUsage failed`, { task_id: grant.task_id, error: String(err) })
    }
    return { usage, written }
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const startedAt = Date.now()
    const token = tokenOf(req.headers)
    // Taken before the grant reads the month's spend: calls settled after it are counted apart.
    const monthReadAt = book.epoch()
    const grant = token ? await o.authorize(token) : null
    if (!grant) {
      req.resume()
      return sendError(res, 401, 'authentication_error', `${PREFIX}: missing, unknown or expired token`)
    }
    const url = new URL(req.url ?? '/', 'http://gateway')
    const span = modelCallSpan(grant, req.method ?? 'GET', url.pathname)
    res.once('close', () => span.end(res.statusCode))
    const provider = providers.for(grant)
    const matched = provider.match(req.method ?? 'GET', url.pathname)
    const route = matched?.route
    if (!route) {
      req.resume()
      return sendError(res, 404, 'not_found_error', `${PREFIX}: not found: ${req.method} ${url.pathname}`)
    }
    const limits = route.metered
      ? limitsOf(grant, totals.get(grant.task_id)?.cost_usd ?? 0, book.epoch(), monthReadAt)
      : []
    const spent = book.spent(limits)
    if (spent) {
      req.resume()
      // 400 like the provider's own "credit balance is too low": clients do not retry it, as they would a 429.
      return sendError(res, 400, 'invalid_request_error', `${PREFIX}: ${spentMessage(spent)}`)
    }

    let body: string | undefined
    let requested: string | undefined
    let maxTokens = 0
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
      const { model: named, max_tokens } = parsed as { model?: unknown; max_tokens?: unknown }
      // Bedrock and Vertex name the model in the path, the Anthropic API in the body.
      const model = matched.model ?? named
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
      if (typeof max_tokens === 'number' && max_tokens > 0) maxTokens = max_tokens
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
    const priced = requested ?? 'unknown'
    let hold: Hold | undefined
    if (limits.length) {
      const beta = req.headers['anthropic-beta']
      const worst = worstCostOf(priced, maxTokens, body ?? '', Array.isArray(beta) ? beta.join(',') : beta)
      const admitted = await book.admit(grant.task_id, limits, worst, abort.signal)
      if ('gone' in admitted) {
        if (admitted.gone === 'ended')
          sendError(res, 401, 'authentication_error', `${PREFIX}: missing, unknown or expired token`)
        return
      }
      if ('spent' in admitted)
        return sendError(res, 400, 'invalid_request_error', `${PREFIX}: ${spentMessage(admitted.spent)}`)
      hold = admitted.hold
    }
    let reader: UsageReader | undefined
    try {
      let upstream: Response
      try {
        // The provider adds the credential: the key, a SigV4 signature or a minted token.
        const forwarded = { method: req.method!, url, model: requested, headers: req.headers, body }
        upstream = await provider.send({ ...forwarded, signal: abort.signal }, upstreamFetch)
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
      if (route.metered && upstream.ok) reader = provider.usageReader(upstream.headers.get('content-type'))
      const check = hold && budgetCheck(hold, priced, maxTokens)
      try {
        const cut = await relayAnswer(upstream.body, res, reader, check)
        if (cut) o.logger?.warn(`${PREFIX}: answer cut at a budget`, { task_id: grant.task_id, reason: cut.message })
      } catch (err) {
        if (!abort.signal.aborted)
          o.logger?.warn(`${PREFIX}: upstream stream failed`, { task_id: grant.task_id, error: String(err) })
        res.destroy()
      }
    } finally {
      // What was streamed before a disconnect or a cut is billed by the provider, so it is metered too.
      const answer = reader?.end()
      const metered = answer && record(grant, requested, answer, startedAt)
      if (metered) span.usage(metered.usage)
      hold?.settle(metered?.usage.cost_usd ?? 0, metered?.written)
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
      book.forget(taskId)
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
