import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent, RunnerOutcome, ToolCall } from '@berth/contract'
import type { StreamRedactor } from './redact.js'
import { schemaErrors } from './schema-check.js'

/** Tool output longer than this is cut (with a note) in `tool_result` events. */
export const MAX_TOOL_OUTPUT = 16_000

type ResultEvent = Extract<RunnerEvent, { type: 'result' }>

/** How a run ended beyond the SDK's messages: interrupted, or answering to a schema. */
export interface ResultContext {
  /** An `interrupt` control line stopped the run. */
  interrupted?: boolean
  /** The input's `output_schema`: the result must carry a valid `structured_output`. */
  schema?: Record<string, unknown>
}

interface Usage {
  input_tokens?: number | null
  output_tokens?: number | null
  cache_creation_input_tokens?: number | null
  cache_read_input_tokens?: number | null
}

const inputTokens = (u: Usage | undefined) =>
  (u?.input_tokens ?? 0) + (u?.cache_creation_input_tokens ?? 0) + (u?.cache_read_input_tokens ?? 0)

function toolOutput(content: unknown): string {
  let text: string
  if (typeof content === 'string') text = content
  else if (Array.isArray(content)) {
    text = content
      .map((b: { type?: string; text?: string }) => (b?.type === 'text' ? (b.text ?? '') : `[${b?.type ?? 'content'}]`))
      .join('\n')
  } else text = content === undefined || content === null ? '' : JSON.stringify(content)
  if (text.length <= MAX_TOOL_OUTPUT) return text
  return `${text.slice(0, MAX_TOOL_OUTPUT)}\n[truncated ${text.length - MAX_TOOL_OUTPUT} characters]`
}

/**
 * Turns the SDK's message stream into Berth's transcript events and, at the end, the one
 * `result`. Only the main agent's messages become turns and tokens; a subagent's work
 * shows as the main agent's `Task`/`Agent` tool call and its result.
 *
 * @example
 * ```ts
 * const t = new Transcript(emit, redactor.stream())
 * for await (const m of query(...)) t.push(m)
 * emit(t.result())
 * ```
 */
export class Transcript {
  private turn = 0
  private open: { input: number; output: number } | null = null
  private readonly calls: ToolCall[] = []
  /** Inputs that ran instead of the agent's (an approval replaced them), by tool-use id. */
  private readonly replaced = new Map<string, unknown>()
  private lastText = ''
  private sessionId: string | null = null
  private final: SDKResultMessage | null = null
  /** The text of a synthetic "API Error: ..." message: the model endpoint failed. */
  private apiError: string | null = null
  private turnUsage = { input: 0, output: 0 }

  constructor(
    private readonly emit: (e: RunnerEvent) => void,
    private readonly tokens: StreamRedactor,
  ) {}

  /** The call `id` ran with `input` instead of the agent's (an approval replaced it): the result's `tool_calls` say so. */
  ran(id: string, input: unknown): void {
    this.replaced.set(id, input)
  }

  /** True once the SDK's own result message arrived. */
  hasResult(): boolean {
    return this.final !== null
  }

  /** Feed one SDK message. */
  push(m: SDKMessage): void {
    if ('session_id' in m && typeof m.session_id === 'string' && m.session_id) this.sessionId = m.session_id
    if (m.type === 'result') {
      this.final = m
      return
    }
    if ('parent_tool_use_id' in m && m.parent_tool_use_id) return
    if (m.type === 'stream_event') {
      this.streamEvent(m.event)
      return
    }
    if (m.type === 'assistant') {
      if (m.error || m.message.model === '<synthetic>') {
        const text = m.message.content.map((b) => (b.type === 'text' ? b.text : '')).join('')
        if (m.error) this.apiError = text || m.error
        return
      }
      const text = m.message.content.map((b) => (b.type === 'text' ? b.text : '')).join('')
      if (text) this.lastText = text
      for (const b of m.message.content) {
        if (b.type !== 'tool_use') continue
        this.flushTokens()
        const call = { id: b.id, name: b.name, input: b.input }
        this.calls.push(call)
        this.emit({ type: 'tool_call', ...call })
      }
      return
    }
    if (m.type === 'user' && Array.isArray(m.message.content)) {
      for (const b of m.message.content) {
        if (b.type !== 'tool_result') continue
        this.flushTokens()
        this.emit({
          type: 'tool_result',
          id: b.tool_use_id,
          output: toolOutput(b.content),
          is_error: b.is_error === true,
        })
      }
    }
  }

  private streamEvent(event: { type: string }): void {
    const e = event as { type: string; [k: string]: unknown }
    if (e.type === 'message_start') {
      this.closeTurn()
      const usage = (e.message as { usage?: Usage } | undefined)?.usage
      this.turn += 1
      this.open = { input: inputTokens(usage), output: usage?.output_tokens ?? 0 }
      this.emit({ type: 'turn_start', turn: this.turn })
    } else if (e.type === 'content_block_delta') {
      const delta = e.delta as { type?: string; text?: string }
      if (delta.type === 'text_delta' && delta.text) this.token(delta.text)
    } else if (e.type === 'message_delta' && this.open) {
      const usage = e.usage as Usage | undefined
      if (usage?.output_tokens != null) this.open.output = usage.output_tokens
      if (usage?.input_tokens != null) this.open.input = Math.max(this.open.input, inputTokens(usage))
    } else if (e.type === 'message_stop') {
      this.closeTurn()
    }
  }

  private token(text: string): void {
    const safe = this.tokens.push(text)
    if (safe) this.emit({ type: 'token', text: safe })
  }

  private flushTokens(): void {
    const rest = this.tokens.flush()
    if (rest) this.emit({ type: 'token', text: rest })
  }

  /** End the open turn, if any (also when a run is cut off mid-turn). */
  closeTurn(): void {
    this.flushTokens()
    if (!this.open) return
    this.turnUsage.input += this.open.input
    this.turnUsage.output += this.open.output
    this.emit({ type: 'turn_end', turn: this.turn, input_tokens: this.open.input, output_tokens: this.open.output })
    this.open = null
  }

  /**
   * The final `result`. Without an SDK result message (crash, cancellation) the outcome
   * is `error_during_execution` with `failure` as the error, usage summed from the turns
   * seen and cost 0 (the SDK's cost estimate never arrived). An interrupted run is
   * `interrupted` with what it did so far; with a schema, a success needs a valid answer.
   */
  result(failure?: string, ctx: ResultContext = {}): ResultEvent {
    this.closeTurn()
    const r = this.final
    const base = { tool_calls: this.toolCalls(), turns: this.turn, session_id: this.sessionId }
    if (ctx.interrupted) {
      return {
        type: 'result',
        outcome: 'interrupted',
        text: this.lastText,
        ...base,
        ...this.usage(r),
        cost_usd: r?.total_cost_usd ?? 0,
        error: 'interrupted',
      }
    }
    if (!r || failure) {
      return {
        type: 'result',
        outcome: 'error_during_execution',
        text: this.lastText,
        ...base,
        ...this.usage(r),
        cost_usd: r?.total_cost_usd ?? 0,
        error: failure ?? 'the agent ended without a result',
      }
    }
    let { outcome, error } = this.outcome(r)
    let structured: { structured_output?: unknown } = {}
    if (ctx.schema && outcome === 'success' && r.subtype === 'success') {
      const value = r.structured_output
      const problems = value === undefined ? ['the agent gave no structured output'] : schemaErrors(ctx.schema, value)
      if (problems.length) {
        outcome = 'error_output_invalid'
        error = `no answer valid for output_schema: ${problems.slice(0, 5).join('; ')}`
      } else structured = { structured_output: value }
    }
    return {
      type: 'result',
      outcome,
      text: r.subtype === 'success' && outcome === 'success' ? r.result : this.lastText,
      ...base,
      ...this.usage(r),
      cost_usd: r.total_cost_usd ?? 0,
      error,
      ...structured,
    }
  }

  /** The calls as they ran: a replaced input is the call's `input`, the agent's its `original_input`. */
  private toolCalls(): ToolCall[] {
    return this.calls.map((c) =>
      this.replaced.has(c.id) ? { ...c, input: this.replaced.get(c.id), original_input: c.input } : c,
    )
  }

  /**
   * Token totals: the SDK's, or the sum of the turns seen when larger (the SDK's result
   * after a budget stop counts only part of the turns).
   */
  private usage(r: SDKResultMessage | null): { input_tokens: number; output_tokens: number } {
    return {
      input_tokens: Math.max(r ? inputTokens(r.usage) : 0, this.turnUsage.input),
      output_tokens: Math.max(r?.usage.output_tokens ?? 0, this.turnUsage.output),
    }
  }

  private outcome(r: SDKResultMessage): { outcome: RunnerOutcome; error: string | null } {
    if (r.subtype === 'success') {
      if (!r.is_error) return { outcome: 'success', error: null }
      const apiFailed = this.apiError !== null || r.api_error_status != null || r.terminal_reason === 'api_error'
      return {
        outcome: apiFailed ? 'model_error' : 'error_during_execution',
        error: r.result || this.apiError || 'the agent failed',
      }
    }
    const error = r.errors?.join('; ') || r.subtype
    if (r.subtype === 'error_max_turns' || r.subtype === 'error_max_budget_usd') return { outcome: r.subtype, error }
    if (r.subtype === 'error_max_structured_output_retries')
      return { outcome: 'error_output_invalid', error: `no answer valid for output_schema: ${error}` }
    return { outcome: this.apiError ? 'model_error' : 'error_during_execution', error: this.apiError ?? error }
  }
}
