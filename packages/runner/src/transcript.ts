import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import {
  emptyUsage,
  mergeUsage,
  type RunnerEvent,
  type RunnerOutcome,
  type TokenUsage,
  type ToolCall,
} from '@berth/contract'
import type { MeteredUsage } from './meter.js'
import type { StreamRedactor } from './redact.js'
import { schemaErrors } from './schema-check.js'

/** Tool output longer than this is cut (with a note) in `tool_result` events. */
export const MAX_TOOL_OUTPUT = 16_000

/** The tool through which Claude Code takes an answer to `output_schema`. */
const STRUCTURED_OUTPUT_TOOL = 'StructuredOutput'

type ResultEvent = Extract<RunnerEvent, { type: 'result' }>

/** How a run ended beyond the SDK's messages: interrupted, or answering to a schema. */
export interface ResultContext {
  /** An `interrupt` control line stopped the run. */
  interrupted?: boolean
  /** The task's model calls reached its `max_budget_usd` (this amount): the run was stopped there. */
  overBudget?: number
  /** The input's `output_schema`: the result must carry a valid `structured_output`. */
  schema?: Record<string, unknown>
  /**
   * The agent ended its turn (its final message) and the SDK's result was held back
   * (background work runs on): a success with what the transcript holds.
   */
  heldResult?: boolean
}

/** Every input token of an answer: fresh, cache writes and cache reads. */
const inputTokens = (u: TokenUsage) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens

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
 * shows as the main agent's `Task`/`Agent` tool call and its result. Each turn is one
 * model call: at its end, `onAnswer` is told its model and usage (the run's meter, when it
 * has no better view of its calls than what the SDK streams).
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
  /** The model call under way: its model and its usage so far. */
  private open: { model: string; usage: TokenUsage } | null = null
  private readonly calls: ToolCall[] = []
  /** Inputs that ran instead of the agent's (an approval replaced them), by tool-use id. */
  private readonly replaced = new Map<string, unknown>()
  private lastText = ''
  private sessionId: string | null = null
  private final: SDKResultMessage | null = null
  /** The text of a synthetic "API Error: ..." message: the model endpoint failed. */
  private apiError: string | null = null

  constructor(
    private readonly emit: (e: RunnerEvent) => void,
    private readonly tokens: StreamRedactor,
    private readonly onAnswer?: (model: string, usage: TokenUsage) => void,
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
      const message = e.message as { model?: unknown; usage?: unknown } | undefined
      const usage = emptyUsage()
      mergeUsage(usage, message?.usage)
      this.turn += 1
      this.open = { model: typeof message?.model === 'string' ? message.model : 'unknown', usage }
      this.emit({ type: 'turn_start', turn: this.turn })
    } else if (e.type === 'content_block_delta') {
      const delta = e.delta as { type?: string; text?: string }
      if (delta.type === 'text_delta' && delta.text) this.token(delta.text)
    } else if (e.type === 'message_delta' && this.open) {
      mergeUsage(this.open.usage, e.usage)
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

  /** End the open turn, if any (also when a run is cut off mid-turn: what streamed until then is billed). */
  closeTurn(): void {
    this.flushTokens()
    if (!this.open) return
    const { model, usage } = this.open
    this.open = null
    this.emit({
      type: 'turn_end',
      turn: this.turn,
      input_tokens: inputTokens(usage),
      output_tokens: usage.output_tokens,
    })
    this.onAnswer?.(model, usage)
  }

  /**
   * The final `result`, with `usage`: the run's own model calls as its meter counted them
   * (read after this closes the open turn). Without an SDK result message (crash,
   * cancellation) the outcome is `error_during_execution` with `failure` as the error,
   * unless the agent ended its turn and the result was held back (`heldResult`). An
   * interrupted run is `interrupted` with what it did so far; with a schema, a success
   * needs a valid answer.
   */
  result(usage: () => MeteredUsage, failure?: string, ctx: ResultContext = {}): ResultEvent {
    this.closeTurn()
    const r = this.final
    const base = { tool_calls: this.toolCalls(), turns: this.turn, session_id: this.sessionId, ...usage() }
    if (ctx.overBudget !== undefined) {
      return {
        type: 'result',
        outcome: 'error_max_budget_usd',
        text: this.lastText,
        ...base,
        error: `Reached maximum budget ($${ctx.overBudget})`,
      }
    }
    if (ctx.interrupted) {
      return {
        type: 'result',
        outcome: 'interrupted',
        text: this.lastText,
        ...base,
        error: 'interrupted',
      }
    }
    if ((!r && !ctx.heldResult) || failure) {
      return {
        type: 'result',
        outcome: 'error_during_execution',
        text: this.lastText,
        ...base,
        error: failure ?? 'the agent ended without a result',
      }
    }
    let { outcome, error } = r ? this.outcome(r) : { outcome: 'success' as RunnerOutcome, error: null }
    let structured: { structured_output?: unknown } = {}
    if (ctx.schema && outcome === 'success') {
      // Without the SDK's result, the answer is the input of the agent's structured output call.
      const value = r?.subtype === 'success' ? r.structured_output : this.structuredCall()
      const problems = value === undefined ? ['the agent gave no structured output'] : schemaErrors(ctx.schema, value)
      if (problems.length) {
        outcome = 'error_output_invalid'
        error = `no answer valid for output_schema: ${problems.slice(0, 5).join('; ')}`
      } else structured = { structured_output: value }
    }
    return {
      type: 'result',
      outcome,
      text: r?.subtype === 'success' && outcome === 'success' ? r.result : this.lastText,
      ...base,
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

  private structuredCall(): unknown {
    return this.calls.findLast((c) => c.name === STRUCTURED_OUTPUT_TOOL)?.input
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
