/** The server span of one API request: what a task's trace begins with when it is submitted over HTTP. */
import { context, propagation, SpanKind, SpanStatusCode, type TextMapGetter } from '@opentelemetry/api'
import type { AnyRoute } from '../route.js'
import { activeTraceId, tracer, tracingRegistered } from '../tracing.js'

const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
}

/**
 * Run `answer` inside a server span named for the route (`POST /v1/tasks`), continuing the
 * caller's `traceparent` when the registered propagator reads one; the span notes the
 * response status, and 5xx answers are errors. `answer` gets the trace id for its log line.
 *
 * @example
 * ```ts
 * const response = await requestSpan(route, request, (traceId) => handle(route, request, traceId))
 * ```
 */
export function requestSpan(
  route: AnyRoute,
  request: Request,
  answer: (traceId: string | undefined) => Promise<Response>,
): Promise<Response> {
  // No SDK: the span, its context and the propagator would all be no-ops; skip making them.
  if (!tracingRegistered()) return answer(undefined)
  const parent = propagation.extract(context.active(), request.headers, headerGetter)
  const attributes = { 'http.request.method': request.method, 'http.route': route.path, 'berth.route': route.name }
  return tracer.startActiveSpan(
    `${request.method} ${route.path}`,
    { kind: SpanKind.SERVER, attributes },
    parent,
    async (span) => {
      try {
        const response = await answer(activeTraceId())
        span.setAttribute('http.response.status_code', response.status)
        if (response.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
        return response
      } finally {
        span.end()
      }
    },
  )
}
