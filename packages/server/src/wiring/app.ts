/** The HTTP side of `createBerth`: the route table on h3, HEAD wherever GET, and Berth's 404/405/OPTIONS answers. */
import {
  ApiError,
  errorResponse,
  noopMetrics,
  type AnyRoute,
  type Logger,
  type Metrics,
  type Pipeline,
} from '@berth/core'
import { H3, getRouterParams, type H3Event } from 'h3'
import { mountConsole } from '../console.js'
import { pathProblem } from './request-path.js'

/** A GET's answer as a HEAD answer: same status and headers, no body (a streamed one is cancelled). */
async function headOf(answer: Promise<Response>): Promise<Response> {
  const res = await answer
  await res.body?.cancel().catch(() => {})
  return new Response(null, { status: res.status, headers: res.headers })
}

/** The request target as the client sent it (Node's, before any URL parser resolved it), else the request URL's path. */
function targetOf(event: H3Event): string {
  const sent = (event.runtime?.node?.req as { url?: string } | undefined)?.url
  if (sent) return sent
  const url = event.req.url
  return url.slice(url.indexOf('/', url.indexOf('//') + 2))
}

/** Compile `/v1/profiles/:id` into a matcher for the 404/405 fallback. */
function pathMatcher(path: string): RegExp {
  const pattern = path
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${pattern}/?$`)
}

/**
 * The h3 app serving `table` through the pipeline `run`, with the browser console when
 * `console` is set.
 *
 * @example
 * ```ts
 * const app = createApp({ table: [...coreRoutes, ...serverRoutes], run: createPipeline({ services, rateLimiter }), logger, console: false })
 * ```
 */
export function createApp(o: {
  table: readonly AnyRoute[]
  run: Pipeline
  logger: Logger
  console: boolean
  /** Requests no route answers are counted as the route `unmatched` (paths are never labels). */
  metrics?: Metrics
}): H3 {
  const { table, run, logger } = o
  const metrics = o.metrics ?? noopMetrics
  const app = new H3({
    // h3's own rejections (e.g. a malformed percent-encoded path) get Berth's error shape.
    onError: (error) => {
      const status = error.status
      if (status === 400) return errorResponse(new ApiError('VALIDATION_FAILED', `Malformed request: ${error.message}`))
      if (status === 404) return errorResponse(new ApiError('NOT_FOUND', 'Not found'))
      if (status === 405) return errorResponse(new ApiError('METHOD_NOT_ALLOWED', 'Method not allowed'))
      if (status === 413) return errorResponse(new ApiError('PAYLOAD_TOO_LARGE', 'Request body too large'))
      return errorResponse(error.cause ?? error, logger)
    },
  })

  // Before routing: a path a URL parser would resolve (`..`, `//`, `\`) is refused, not resolved.
  app.use(async (event: H3Event) => {
    const problem = pathProblem(targetOf(event))
    if (problem === null) return undefined
    const error = new ApiError('VALIDATION_FAILED', `Malformed request path: it has ${problem}`, {
      issues: [{ location: 'path', path: '', message: `has ${problem}; paths are routed as written` }],
    })
    return counted(event, () => refusal(event, error))
  })
  for (const route of table) {
    app.on(route.method, route.path, (event: H3Event) =>
      run(route, event.req, getRouterParams(event, { decode: true }), event.url),
    )
    // HEAD wherever GET: the GET's status and headers, its body dropped unread.
    if (route.method === 'GET')
      app.on('HEAD', route.path, (event: H3Event) =>
        headOf(run(route, event.req, getRouterParams(event, { decode: true }), event.url)),
      )
  }
  if (o.console) mountConsole(app)
  const matchers = table.map((r) => ({ method: r.method, re: pathMatcher(r.path) }))
  app.all('/**', (event: H3Event) => counted(event, () => unmatched(event)))
  return app

  /** An answer no route gave, counted as the route `unmatched` (paths are never labels). */
  async function counted(event: H3Event, answer: () => Promise<Response>): Promise<Response> {
    const started = performance.now()
    const response = await answer()
    const seconds = (performance.now() - started) / 1000
    metrics.requestEnded({ route: 'unmatched', method: event.req.method, status: response.status, seconds })
    return response
  }

  /**
   * The rate-limit headers of a /v1 request, or the 429 answer when its bucket is empty:
   * every /v1 answer counts against a rate limit and says so, 400, 404 and 405 included.
   */
  async function limitsOf(event: H3Event): Promise<Record<string, string> | Response> {
    const path = event.url.pathname
    if (path !== '/v1' && !path.startsWith('/v1/')) return {}
    try {
      return await run.limitHeaders(event.req)
    } catch (err) {
      return errorResponse(err, logger)
    }
  }

  /** `error` as the answer, with the rate-limit headers and `extra`. */
  async function refusal(event: H3Event, error: ApiError, extra: Record<string, string> = {}): Promise<Response> {
    const limits = await limitsOf(event)
    return limits instanceof Response ? limits : errorResponse(error, undefined, { ...limits, ...extra })
  }

  /** Berth's answer to a request no route matches: 404, 405, or the OPTIONS list. */
  async function unmatched(event: H3Event): Promise<Response> {
    const path = event.url.pathname
    const allowed = [...new Set(matchers.filter((m) => m.re.test(path)).map((m) => m.method))]
    if (allowed.length === 0)
      return refusal(event, new ApiError('NOT_FOUND', `No route for ${event.req.method} ${path.slice(0, 200)}`))
    const allow = allowed.join(', ')
    if (event.req.method === 'OPTIONS') {
      const limits = await limitsOf(event)
      return limits instanceof Response ? limits : new Response(null, { status: 204, headers: { ...limits, allow } })
    }
    const error = new ApiError('METHOD_NOT_ALLOWED', `${event.req.method} is not allowed on ${path.slice(0, 200)}`, {
      allow: allowed,
    })
    return refusal(event, error, { allow })
  }
}
