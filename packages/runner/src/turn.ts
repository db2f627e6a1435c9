import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'

/**
 * What says the agent's turn is over. `result`: the SDK's result for the task's messages. `final_message`:
 * the agent's last message ended its turn (stop reason `end_turn`, no tool of its own
 * running) while background work it started runs on; Claude Code may hold its result back
 * until that work ends, which for a dev server is never.
 */
export type TurnEnd = 'result' | 'final_message'

/** One background task Claude Code runs for the agent (a `run_in_background` shell, a subagent, a monitor). */
export interface BackgroundTask {
  task_id: string
  task_type: string
  description: string
  /** When this process first saw it running (ISO 8601). */
  since: string
}

/**
 * Watches the SDK's message stream of one Claude Code process and says when the agent's
 * turn ends, independently of the process's exit: a task is one user message and the
 * agent's turns until it ends its turn, and work it left running in the background does
 * not hold that end back. It also keeps the set of live background tasks (from the SDK's
 * level signal, `background_tasks_changed`), so that whoever ends the task can stop them.
 * Only the main agent's messages count; a subagent's turns are part of its tool call. A
 * result counts when it answers a message the task sent ({@link TurnWatch.sent}): Claude
 * Code also writes results of its own, such as one for the notice, on a resumed
 * conversation, that a background task of the previous process was stopped, or one for a
 * background task's end that came between a living session's tasks: the agent's final
 * message counts only once Claude Code works on the task's own message (its
 * `command_lifecycle` messages say which).
 *
 * @example
 * ```ts
 * const watch = new TurnWatch()
 * watch.sent(prompt.uuid)
 * for await (const m of query(...)) {
 *   const end = watch.push(m) // 'result' | 'final_message' | null
 *   if (end) console.log('turn over', end, watch.background())
 * }
 * ```
 */
export class TurnWatch {
  private live: BackgroundTask[] = []
  /** The uuids of the user messages the task sent. */
  private readonly asked = new Set<string>()
  /** The main agent's tool calls that have no result yet. */
  private readonly tools = new Set<string>()
  /** The stop reason of the main agent's model call under way (or just ended). */
  private stopReason: string | null = null
  private final = false
  /** Claude Code says which queued command (user message) it works on: seen at least once. */
  private lifecycle = false
  /** Claude Code started on one of the task's messages (a turn of its own may come first). */
  private ours = false

  /**
   * A new task begins in this process (a living session's next follow-up): what the
   * previous task sent no longer counts. The background tasks carry on.
   */
  beginTask(): void {
    this.asked.clear()
    this.tools.clear()
    this.stopReason = null
    this.final = false
    this.ours = false
  }

  /** A user message of the task went to Claude Code with this uuid. */
  sent(uuid: string): void {
    this.asked.add(uuid)
  }

  /** Feed one SDK message; says whether it ends the turn. */
  push(m: SDKMessage): TurnEnd | null {
    if (m.type === 'result') return this.answersTask(m) ? 'result' : null
    const lifecycle = m as unknown as { type: string; command_uuid?: string; state?: string }
    if (lifecycle.type === 'command_lifecycle') {
      this.lifecycle = true
      if (lifecycle.state === 'started' && this.asked.has(lifecycle.command_uuid ?? '')) this.ours = true
      return null
    }
    if (m.type === 'system') {
      // A level signal with replace semantics: a missed start or end cannot leave a stale entry.
      if (m.subtype === 'background_tasks_changed') {
        const since = new Map(this.live.map((t) => [t.task_id, t.since]))
        const now = new Date().toISOString()
        this.live = m.tasks.map((t) => ({
          task_id: t.task_id,
          task_type: t.task_type,
          description: t.description,
          since: since.get(t.task_id) ?? now,
        }))
      }
      return null
    }
    if ('parent_tool_use_id' in m && m.parent_tool_use_id) return null
    if (m.type === 'stream_event') {
      const e = m.event as { type: string; delta?: { stop_reason?: string | null } }
      if (e.type === 'message_start') {
        this.stopReason = null
        this.final = false
      } else if (e.type === 'message_delta' && e.delta?.stop_reason) this.stopReason = e.delta.stop_reason
      else if (e.type === 'message_stop') return this.turnOver()
      return null
    }
    if (m.type === 'assistant') {
      for (const b of m.message.content) if (b.type === 'tool_use') this.tools.add(b.id)
      // Without partial messages, the stop reason comes on the assistant message itself.
      if (m.message.stop_reason) {
        this.stopReason = m.message.stop_reason
        return this.turnOver()
      }
      return null
    }
    if (m.type === 'user' && Array.isArray(m.message.content)) {
      for (const b of m.message.content) if (b.type === 'tool_result') this.tools.delete(b.tool_use_id)
      this.final = false
    }
    return null
  }

  /**
   * True while the agent's last message ended its turn and nothing has happened since (no
   * new model call, no tool result): the turn is still over.
   */
  get atFinalMessage(): boolean {
    return this.final
  }

  /** The background tasks running now. */
  background(): BackgroundTask[] {
    return [...this.live]
  }

  private answersTask(r: SDKResultMessage): boolean {
    const echoed = r.user_message_uuids ?? (r.user_message_uuid ? [r.user_message_uuid] : [])
    if (echoed.length) return echoed.some((u) => this.asked.has(u))
    // Echoes nothing (a crash at start, an older CLI): any result but one of Claude Code's own turns.
    return r.origin === undefined || r.origin.kind === 'human'
  }

  private turnOver(): TurnEnd | null {
    // A turn Claude Code took of its own (a background task's notification) before the task's own.
    if (this.lifecycle && !this.ours) return null
    if (this.final || this.stopReason !== 'end_turn' || this.tools.size > 0) return null
    this.final = true
    // With nothing in the background, the SDK's result follows at once: wait for it.
    return this.live.length > 0 ? 'final_message' : null
  }
}
