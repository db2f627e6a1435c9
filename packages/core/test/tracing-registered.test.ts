// The request path skips its span when nothing would use it: no tracer provider and no
// propagator. Registering either, at any time, turns the span back on.
import { propagation, trace, type TextMapPropagator, type TracerProvider } from '@opentelemetry/api'
import { afterEach, describe, expect, it } from 'vitest'
import { tracingRegistered, tracer } from '../src/tracing.js'

afterEach(() => {
  trace.disable()
  propagation.disable()
})

describe('tracingRegistered', () => {
  it('is off with nothing registered', () => {
    expect(tracingRegistered()).toBe(false)
  })

  it('is on once a tracer provider registers, and off again when it goes', () => {
    const provider: TracerProvider = { getTracer: () => tracer }
    expect(trace.setGlobalTracerProvider(provider)).toBe(true)
    expect(tracingRegistered()).toBe(true)
    trace.disable()
    expect(tracingRegistered()).toBe(false)
  })

  it('is on with a propagator alone (its trace id goes on the log line)', () => {
    const propagator: TextMapPropagator = {
      inject() {},
      extract: (ctx) => ctx,
      fields: () => ['traceparent'],
    }
    expect(propagation.setGlobalPropagator(propagator)).toBe(true)
    expect(tracingRegistered()).toBe(true)
  })
})
