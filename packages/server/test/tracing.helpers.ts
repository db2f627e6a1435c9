/**
 * An in-process OpenTelemetry SDK for tests: a tracer provider exporting every span at once
 * (OTLP/HTTP JSON) to a receiver from `@berth/testkit`, registered as the global provider
 * with the async-hooks context manager and the W3C propagator, as the Node SDK would.
 */
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import type { ReceivedSpan } from '@berth/testkit'

/**
 * Register the SDK for this test file's process; `shutdown()` flushes and unregisters it.
 *
 * @example
 * ```ts
 * const otlp = await startOtlpReceiver()
 * const sdk = registerTracing(otlp.tracesUrl)
 * ```
 */
export function registerTracing(tracesUrl: string, serviceName = 'berth-test'): { shutdown(): Promise<void> } {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: tracesUrl }) })],
  })
  const contextManager = new AsyncLocalStorageContextManager().enable()
  context.setGlobalContextManager(contextManager)
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
  return {
    async shutdown() {
      await provider.shutdown()
      trace.disable()
      propagation.disable()
      context.disable()
    },
  }
}

/** The spans of one trace by name (the first of each name), for parent checks. */
export function byName(spans: ReceivedSpan[], traceId: string): Map<string, ReceivedSpan> {
  const named = new Map<string, ReceivedSpan>()
  for (const s of spans) if (s.traceId === traceId && !named.has(s.name)) named.set(s.name, s)
  return named
}

/** The trace id of the task's `task.submit` span, once received. */
export function taskTraceId(spans: ReceivedSpan[], taskId: string): string | undefined {
  return spans.find((s) => s.name === 'task.submit' && s.attributes['berth.task.id'] === taskId)?.traceId
}
