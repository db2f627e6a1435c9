/** The request pipeline: authenticate, rate-limit, validate and answer one route for one request. */
import * as v from 'valibot'
import { ApiError, randomToken } from '@berth/contract'
import { inRequest, type RequestScope } from '../audit/context.js'
import {
  assertMediaType,
  assertNoBody,
  carriesBody,
  coerceQuery,
  isClientAbort,
  parseInput,
  readJsonBody,
} from '../internal/input.js'
import type { RateDecision, RateLimiter } from '../limits/rate-limit.js'
import type { Logger } from '../ports/logger.js'
import { secondsFrom } from '../ports/metrics.js'
import type { Caller } from '../caller.js'
import type { AnyRoute } from '../route.js'
import type { Services } from '../services.js'
import { createAuthenticate, type Authenticate } from './auth.js'
import { limitBody } from './body-limit.js'
import { errorResponse, json } from './response.js'
import { requestSpan } from './request-span.js'
import { tracingRegistered } from '../tracing.js'

export interface PipelineOptions {
  services: Services
  rateLimiter: RateLimiter
  /** Custom authentication; defaults to Berth caller keys and the operator token. */
  authenticate?: Authenticate | undefined
  /** JSON body limit in bytes (default 1 MiB). */
  bodyLimit?: number
  /** Body limit of `multipart` (upload) routes in bytes (default 100 MiB). */
  uploadLimit?: number
  /** Check every response against its schema (tests and development): a mismatch is a 500. */
  validateResponses?: boolean
  logger: Logger
  /**
   * The `Response` class to build JSON responses with. A server may pass a faster
   * subclass (srvx's `FastResponse` on Node writes string bodies straight out).
   */
  responseClass?: typeof Response
}

/** The request path for the log, with the route's credential segments replaced. */
function loggedPath(route: AnyRoute, pathname: string): string {
  if (!route.secretParams?.length) return pathname
  const template = route.path.split('/')
  return pathname
    .split('/')
    .map((segment, i) =>
      route.secretParams!.includes(template[i]?.slice(1) ?? '') && template[i]!.startsWith(':')
        ? '[redacted]'
        : segment,
    )
    .join('/')
}

/**
 * The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy`
 * states the bucket (burst, the window it refills in, and the per-minute rate), the others
 * the state of the caller's bucket.
 */
function rateHeaders(d: RateDecision): Record<string, string> {
  // Built in place: the pipeline adds the request id to this object and hands it to the response.
  const headers: Record<string, string> = {}
  if (d.policy) headers['ratelimit-policy'] = d.policy
  headers['ratelimit-limit'] = String(d.limit)
  headers['ratelimit-remaining'] = String(d.remaining)
  headers['ratelimit-reset'] = String(d.resetSeconds)
  return headers
}

/** The client address the server saw, when it says (srvx's `request.ip`). */
function clientAddress(request: Request): string | null {
  return (request as { ip?: string }).ip ?? null
}

/** The rate-limit key of an unauthenticated request: its client address. */
function addressKey(request: Request): string {
  return `address:${clientAddress(request) ?? 'unknown'}`
}

/** The request's own `x-request-id` when it is a plain token, else a new one: logs and audit entries carry it. */
function requestIdOf(request: Request): string {
  const given = request.headers.get('x-request-id')
  return given && /^[A-Za-z0-9_.:-]{1,128}$/.test(given) ? given : `req_${randomToken(20)}`
}

/** Keep a bucket's answer as the request's headers; throw 429 when it refused. */
function decide(d: RateDecision, out: { headers?: Record<string, string> }): void {
  out.headers = rateHeaders(d)
  if (!d.allowed) throw rateLimited(d)
}

function rateLimited(d: RateDecision): ApiError {
  return new ApiError(
    'RATE_LIMITED',
    `Rate limit exceeded: ${d.limit} requests at once, refilled over a minute`,
    { limit: d.limit, retry_after: d.retryAfterSeconds },
    { 'retry-after': String(d.retryAfterSeconds) },
  )
}

/**
 * Builds the function that runs one route for one request: authenticate, rate-limit,
 * validate params/query/body, call the handler, shape the response. Every route goes
 * through it, so errors, limits and validation are uniform.
 *
 * @example
 * ```ts
 * const run = createPipeline({ services, rateLimiter, logger })
 * const res = await run(routes[0], request, {})
 * ```
 */
export function createPipeline(opts: PipelineOptions) {
  const { services, rateLimiter, logger } = opts
  const bodyLimit = opts.bodyLimit ?? 1024 * 1024
  const uploadLimit = opts.uploadLimit ?? 100 * 1024 * 1024
  const R = opts.responseClass ?? Response
  const authenticate = createAuthenticate(opts)

  /**
   * Take a token for a request: the caller's, or for a request without valid credentials
   * its client address's (so guessing keys is throttled). Returns the headers; throws 429.
   */
  function take(key: string, out: { headers?: Record<string, string> }): void | Promise<void> {
    // The in-process bucket answers at once: no promise (and no turn of the microtask queue) for it.
    const d = rateLimiter.take(key)
    return d instanceof Promise ? d.then((answer) => decide(answer, out)) : decide(d, out)
  }

  /**
   * The caller of a request for a route (its token taken), or a thrown 401/403/429. A caller
   * known at once (a cached key, the in-process bucket) is answered without a promise.
   */
  function callerFor(
    route: AnyRoute,
    request: Request,
    out: { headers?: Record<string, string> },
  ): Caller | null | Promise<Caller | null> {
    if (route.auth === 'public') return null
    const known = authenticate(request)
    return known instanceof Promise
      ? known.then((c) => admit(route, request, c, out))
      : admit(route, request, known, out)
  }

  function admit(
    route: AnyRoute,
    request: Request,
    caller: Caller | null,
    out: { headers?: Record<string, string> },
  ): Caller | Promise<Caller> {
    if (!caller) return refuse(request, out)
    if (!route.unlimited) {
      const taken = take(caller.id, out)
      if (taken) return taken.then(() => authorize(route, caller))
    }
    return authorize(route, caller)
  }

  /** 401 for a request without valid credentials, after its address's token is taken (429 first when none is left). */
  async function refuse(request: Request, out: { headers?: Record<string, string> }): Promise<never> {
    services.audit.authFailed(clientAddress(request))
    await take(addressKey(request), out)
    throw new ApiError('UNAUTHORIZED', 'Missing or invalid credentials: send Authorization: Bearer <key>')
  }

  /** The caller, or a thrown 403 (audited) when the route is for admins and it is not one. */
  function authorize(route: AnyRoute, caller: Caller): Caller | Promise<Caller> {
    return route.auth === 'admin' && caller.role !== 'admin' ? forbid(route, caller) : caller
  }

  async function forbid(route: AnyRoute, caller: Caller): Promise<never> {
    await services.audit.record({
      action: 'auth.forbidden',
      target: { type: 'route', id: route.name },
      outcome: 'failure',
      actor: { type: caller.role, id: caller.id },
    })
    throw new ApiError('FORBIDDEN', 'This operation requires an admin caller')
  }

  /**
   * Rate-limit headers for a `/v1` request no route answers (404, 405): its token is taken
   * like any request's. Throws 429 when the bucket is empty.
   */
  async function limitHeaders(request: Request): Promise<Record<string, string>> {
    const out: { headers?: Record<string, string> } = {}
    const caller = await authenticate(request)
    await take(caller ? caller.id : addressKey(request), out)
    return out.headers ?? {}
  }

  /** One request in its scope (caller, request id, address) and its server span (a child of the caller's `traceparent` header, when it sends one). */
  function run(
    route: AnyRoute,
    request: Request,
    rawParams: Record<string, string>,
    /** The request's URL when the server has parsed it already (h3's `event.url`). */
    parsedUrl?: URL,
  ): Promise<Response> {
    const scope: RequestScope = { caller: null, request_id: requestIdOf(request), source: clientAddress(request) }
    // No SDK registered: no span to open, and one closure less per request.
    return inRequest(scope, () =>
      tracingRegistered()
        ? requestSpan(route, request, (traceId) => answer(route, request, rawParams, scope, traceId, parsedUrl))
        : answer(route, request, rawParams, scope, undefined, parsedUrl),
    )
  }

  async function answer(
    route: AnyRoute,
    request: Request,
    rawParams: Record<string, string>,
    scope: RequestScope,
    traceId: string | undefined,
    parsedUrl: URL | undefined,
  ): Promise<Response> {
    const started = performance.now()
    const limits: { headers?: Record<string, string> } = {}
    let headers: Record<string, string> | undefined
    let caller: Caller | null = null
    let response: Response
    const url = parsedUrl ?? new URL(request.url)
    try {
      try {
        const known = callerFor(route, request, limits)
        caller = known instanceof Promise ? await known : known
        scope.caller = caller
      } finally {
        // `limits.headers` is this request's own object (rateHeaders): no copy needed.
        headers = limits.headers ?? {}
        headers['x-request-id'] = scope.request_id
      }
      const params = route.params ? parseInput('params', route.params, rawParams) : undefined
      const query = route.query
        ? parseInput('query', route.query, coerceQuery(route.query, url.searchParams))
        : undefined
      let body: unknown
      if (route.body) {
        const read = await readJsonBody(request, bodyLimit)
        const raw = read === undefined && route.bodyOptional ? {} : read
        // valibot's object schemas accept arrays; a body is always a JSON object here.
        if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
          throw new ApiError('VALIDATION_FAILED', 'The body must be a JSON object', {
            issues: [
              {
                location: 'body',
                path: '',
                message:
                  raw === undefined
                    ? 'missing body'
                    : `expected an object, got ${Array.isArray(raw) ? 'an array' : raw === null ? 'null' : typeof raw}`,
              },
            ],
          })
        }
        body = parseInput('body', route.body, raw)
      } else if (route.multipart) {
        // Without a body the handler answers (its 404 for another caller's workspace first).
        if (carriesBody(request)) assertMediaType(request, 'multipart')
      } else if (!route.rawBody) {
        // A body the operation does not take is refused, not ignored (the raw-body routes read theirs).
        const reading = assertNoBody(request)
        if (reading) await reading
      }
      const input = route.multipart ? limitBody(request, uploadLimit) : request
      const result = await route.handle({ caller: caller as Caller, params, query, body, services, request: input })
      response = toResponse(route, result, headers)
    } catch (err) {
      // A 404 for an id the caller does not have is counted in the audit log (per caller, kind and minute).
      if (caller) services.audit.denied(caller, route.name, err)
      if (isClientAbort(err))
        logger.info('client aborted', {
          method: request.method,
          path: loggedPath(route, url.pathname),
          route: route.name,
        })
      response = errorResponse(err, logger, headers, R)
    }
    logger.info('request', {
      method: request.method,
      // The path only: query strings may carry tokens (`?token=` on the WebSocket).
      path: loggedPath(route, url.pathname),
      route: route.name,
      status: response.status,
      ms: Math.round((performance.now() - started) * 10) / 10,
      caller: caller?.id,
      request_id: scope.request_id,
      trace_id: traceId,
    })
    services.metrics.requestEnded({
      route: route.name,
      method: request.method,
      status: response.status,
      seconds: secondsFrom(started),
    })
    return response
  }

  return Object.assign(run, { limitHeaders })

  function toResponse(route: AnyRoute, result: unknown, headers?: Record<string, string>): Response {
    if (result instanceof Response) {
      if (headers) for (const [k, val] of Object.entries(headers)) result.headers.set(k, val)
      return result
    }
    const status = route.status ?? 200
    if (status === 204) return new R(null, { status, headers })
    if (opts.validateResponses && route.response) {
      const check = v.safeParse(route.response, result)
      if (!check.success) {
        logger.error('response does not match its schema', {
          route: route.name,
          issues: check.issues.map((i) => i.message),
        })
        throw new Error(`response of ${route.name} does not match its schema`)
      }
    }
    return json(result, status, headers, R)
  }
}

export type Pipeline = ReturnType<typeof createPipeline>
