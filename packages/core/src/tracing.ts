/**
 * Tracing with the OpenTelemetry API: Berth creates spans through it, and they cost nothing
 * until the process registers an SDK (the standalone server does when an OTLP endpoint is
 * set). A task's trace context travels as a W3C `traceparent` string on its record, so the
 * instance that runs the task continues the trace the submitting instance began.
 */
import {
  context,
  isSpanContextValid,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api'
import { isApiError } from '@berth/contract'

/** The tracer every Berth span comes from (a proxy until an SDK registers a provider). */
export const tracer = trace.getTracer('berth')

/** The API's no-op provider: what an unregistered global proxy delegates to. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate()

/**
 * Whether an OpenTelemetry tracer provider or propagator is registered (checked per call: one
 * may register later). Without either every span is a no-op that carries no caller's trace
 * id, and hot paths skip making them.
 *
 * @example
 * ```ts
 * if (!tracingRegistered()) return answer(undefined)
 * ```
 */
export function tracingRegistered(): boolean {
  const provider = trace.getTracerProvider()
  if (!(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NOOP_PROVIDER) return true
  // A propagator alone still puts the caller's `traceparent` trace id on the request's log line.
  return propagation.fields().length > 0
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * The W3C `traceparent` of a span, or undefined when it belongs to no trace (no SDK
 * registered, or not sampled and without a parent).
 *
 * @example
 * ```ts
 * const span = tracer.startSpan('task.submit')
 * traceparentOf(span) // '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' (with an SDK)
 * ```
 */
export function traceparentOf(span: Span): string | undefined {
  const sc = span.spanContext()
  if (!isSpanContextValid(sc)) return undefined
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0')
  return `00-${sc.traceId}-${sc.spanId}-${flags}`
}

/**
 * A context whose parent is the span a `traceparent` names (the root context for a
 * missing or malformed one), to start the spans that continue a stored trace.
 *
 * @example
 * ```ts
 * const span = tracer.startSpan('task.run', {}, traceContext(task.trace))
 * ```
 */
export function traceContext(traceparent: string | undefined | null): Context {
  const m = traceparent ? TRACEPARENT.exec(traceparent) : null
  if (!m) return ROOT_CONTEXT
  const sc = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  }
  return isSpanContextValid(sc) ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT
}

/**
 * The trace id of the span active here, for log lines (undefined without one).
 *
 * @example
 * ```ts
 * logger.info('request', { path, trace_id: activeTraceId() })
 * ```
 */
export function activeTraceId(): string | undefined {
  const sc = trace.getActiveSpan()?.spanContext()
  return sc && isSpanContextValid(sc) ? sc.traceId : undefined
}

/**
 * End a span with an error status and the error's class (never its message, which may
 * quote a caller's input).
 *
 * @example
 * ```ts
 * try { await work() } catch (err) { failSpan(span, err); throw err } finally { span.end() }
 * ```
 */
export function failSpan(span: Span, err: unknown, code?: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, ...(code && { message: code }) })
  span.setAttribute('error.type', code ?? (err instanceof Error ? err.name : 'unknown'))
}

/**
 * Run `fn` inside a new active span, ended when `fn` settles (marked an error when it throws).
 *
 * @example
 * ```ts
 * const submitted = await traced('task.submit', { 'berth.task.mode': 'batch' }, (span) => admit(span))
 * ```
 */
export function traced<T>(name: string, attributes: Attributes, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, context.active(), async (span) => {
    try {
      return await fn(span)
    } catch (err) {
      failSpan(span, err, isApiError(err) ? err.code : undefined)
      throw err
    } finally {
      span.end()
    }
  })
}
