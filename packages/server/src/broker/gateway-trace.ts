/**
 * The span of one model call through the gateway: a child of the task's trace (its grant
 * carries the run's `traceparent`), named and attributed after the OpenTelemetry GenAI
 * conventions: the model, the tokens and cost the provider reported, the answer's status.
 * Never the request's messages or the answer's text.
 */
import { traceContext, tracer, type GatewayGrant } from '@berth/core'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'

/** What the gateway metered for one answer (a `ModelUsage`). */
interface MeteredUsage {
  model: string
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  cost_usd: number
}

/** One model call's span, filled in as the gateway learns more and ended with the response. */
export interface ModelCallSpan {
  /** The requested model; `chat`: a Messages call (named `chat <model>`), not a token count. */
  model(name: string, chat: boolean): void
  usage(u: MeteredUsage): void
  end(status: number): void
}

/** OpenTelemetry's `gen_ai.provider.name` for each provider the gateway reaches. */
const GEN_AI_PROVIDER = { anthropic: 'anthropic', bedrock: 'aws.bedrock', vertex: 'gcp.vertex_ai' } as const

/**
 * Open the span of one request a run makes through the gateway.
 *
 * @example
 * ```ts
 * const span = modelCallSpan(grant, 'POST', '/v1/messages')
 * span.model('claude-sonnet-4-5', true)
 * res.once('close', () => span.end(res.statusCode))
 * ```
 */
export function modelCallSpan(grant: GatewayGrant, method: string, path: string): ModelCallSpan {
  const span = tracer.startSpan(
    `${method} ${path}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.provider.name': GEN_AI_PROVIDER[grant.upstream.provider ?? 'anthropic'],
        'http.request.method': method,
        'url.path': path,
        'berth.task.id': grant.task_id,
      },
    },
    traceContext(grant.trace),
  )
  let ended = false
  return {
    model(name, chat) {
      span.setAttribute('gen_ai.request.model', name)
      if (!chat) return
      span.updateName(`chat ${name}`)
      span.setAttribute('gen_ai.operation.name', 'chat')
    },
    usage(u) {
      span.setAttributes({
        'gen_ai.response.model': u.model,
        'gen_ai.usage.input_tokens': u.input_tokens,
        'gen_ai.usage.output_tokens': u.output_tokens,
        'gen_ai.usage.cache_creation.input_tokens': u.cache_creation_input_tokens,
        'gen_ai.usage.cache_read.input_tokens': u.cache_read_input_tokens,
        'berth.cost_usd': u.cost_usd,
      })
    },
    end(status) {
      if (ended) return
      ended = true
      span.setAttribute('http.response.status_code', status)
      if (status >= 400) span.setStatus({ code: SpanStatusCode.ERROR, message: String(status) })
      span.end()
    },
  }
}
