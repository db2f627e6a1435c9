/**
 * The spans of one task run, continued from the trace context stored on the task (so a task
 * queued on one instance and run on another stays one trace): the wait in the queue, the
 * run, the claim of a container, the runner and each tool call the runner reports. Span
 * attributes name ids, tools, statuses and error codes, never a prompt, a tool's input or
 * output, or a secret.
 */
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api'
import { failSpan, traceContext, traceparentOf, tracer } from '../tracing.js'
import type { TaskEnd, TaskRecord } from './task.js'

/**
 * The spans of one run, opened when the run begins and ended with the task.
 *
 * @example
 * ```ts
 * const spans = new RunTrace(task, instanceId)
 * const leased = await spans.claim(() => containers.lease(plan, signal))
 * spans.end({ status: 'completed' })
 * ```
 */
export class RunTrace {
  private readonly run: Span
  private runner: Span | undefined
  private readonly tools = new Map<string, Span>()
  private seen = false
  private sawTurn = false
  private sawToken = false

  constructor(task: TaskRecord, instanceId: string | undefined) {
    const parent = traceContext(task.trace)
    const attributes = { 'berth.task.id': task.id, 'berth.task.mode': task.mode }
    // The wait began with the submit, possibly on another instance: its span starts there.
    tracer.startSpan('task.queue', { attributes, startTime: new Date(task.created_at) }, parent).end()
    this.run = tracer.startSpan(
      'task.run',
      { attributes: { ...attributes, ...(instanceId && { 'berth.instance.id': instanceId }) } },
      parent,
    )
  }

  /** The run's `traceparent`: stored on the task, so the model gateway's spans are its children. */
  get traceparent(): string | undefined {
    return traceparentOf(this.run)
  }

  /** The claim of a container, as a child span. */
  async claim<T>(fn: () => Promise<T>): Promise<T> {
    const span = tracer.startSpan('task.claim', {}, traceContext(this.traceparent))
    try {
      return await fn()
    } catch (err) {
      failSpan(span, err)
      throw err
    } finally {
      span.end()
    }
  }

  /**
   * Open the runner's span; a runner started for this task (not a warm agent, whose input
   * was fixed before) gets its context as `TRACEPARENT` in its environment. For a warm
   * agent, `ready` says whether its Claude Code was up when the task took it.
   */
  runnerInput(input: RunnerInput, fresh: boolean, ready = false): RunnerInput {
    this.runner = tracer.startSpan(
      'task.runner',
      { attributes: { 'berth.runner.warm': !fresh, ...(!fresh && { 'berth.runner.ready': ready }) } },
      traceContext(this.traceparent),
    )
    const traceparent = traceparentOf(this.runner)
    return fresh && traceparent ? { ...input, env: { ...input.env, TRACEPARENT: traceparent } } : input
  }

  /**
   * One runner event, as it arrives (before it is recorded): the first marks the runner
   * started (it echoes the prompt), the first `turn_start` the model's answer beginning and
   * the first `token` its first text (the steps of time to first token); tool calls open
   * and close their spans.
   */
  event(event: RunnerEvent): void {
    if (!this.runner) return
    if (!this.seen) {
      this.seen = true
      this.runner.addEvent('runner.first_event')
    }
    if (event.type === 'turn_start' && !this.sawTurn) {
      this.sawTurn = true
      this.runner.addEvent('runner.first_turn')
    }
    if (event.type === 'token' && !this.sawToken) {
      this.sawToken = true
      this.runner.addEvent('runner.first_token')
    }
    if (event.type === 'tool_call') {
      const span = tracer.startSpan(
        `execute_tool ${event.name}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': event.name,
            'gen_ai.tool.call.id': event.id,
          },
        },
        traceContext(traceparentOf(this.runner)),
      )
      this.tools.set(event.id, span)
    } else if (event.type === 'tool_result') {
      const span = this.tools.get(event.id)
      this.tools.delete(event.id)
      if (event.is_error) span?.setStatus({ code: SpanStatusCode.ERROR })
      span?.end()
    }
  }

  /** End every span still open with the task's end: its status and error code. */
  end(end: TaskEnd): void {
    for (const span of this.tools.values()) span.end()
    this.tools.clear()
    this.runner?.end()
    this.run.setAttribute('berth.task.status', end.status)
    const code = end.error?.code
    if (code) this.run.setAttribute('berth.task.error_code', code)
    if (end.status === 'failed') this.run.setStatus({ code: SpanStatusCode.ERROR, ...(code && { message: code }) })
    this.run.end()
  }
}
