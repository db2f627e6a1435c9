/**
 * The trace context a task carries on its record (a W3C `traceparent`): read back into a
 * parent context, malformed values start no trace, and an instance without an SDK passes
 * a stored context on unchanged (its no-op spans keep their parent's), so the record's
 * trace survives a hop through an instance that does not trace.
 */
import { isSpanContextValid, trace } from '@opentelemetry/api'
import { describe, expect, it } from 'vitest'
import { activeTraceId, traceContext, traceparentOf, tracer } from '../src/tracing.js'

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

describe('trace context on a task record', () => {
  it('reads a traceparent into a remote parent', () => {
    const sc = trace.getSpanContext(traceContext(TP))!
    expect(sc).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 })
    expect(sc.isRemote).toBe(true)
  })

  it('starts no trace from a missing or malformed value', () => {
    for (const bad of [
      undefined,
      null,
      '',
      'garbage',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      `${TP}-extra`,
    ]) {
      const sc = trace.getSpanContext(traceContext(bad))
      expect(sc === undefined || !isSpanContextValid(sc), String(bad)).toBe(true)
    }
  })

  it('without an SDK, a span continues its stored parent and gives the same traceparent back', () => {
    const span = tracer.startSpan('task.run', {}, traceContext(TP))
    expect(traceparentOf(span)).toBe(TP)
    span.end()
    expect(traceparentOf(tracer.startSpan('task.submit'))).toBeUndefined()
    expect(activeTraceId()).toBeUndefined()
  })
})
