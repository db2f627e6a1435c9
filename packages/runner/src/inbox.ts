import { randomUUID } from 'node:crypto'
import type { SDKUserMessage } from '@anthropic-ai/claude-agent-sdk'

/**
 * Claude Code's streaming input: the user messages of every task the agent serves, in
 * order, each with a uuid of its own (the SDK's result and `command_lifecycle` messages for
 * it echo that uuid). The input stays open until {@link Inbox.end}, so Claude Code stays up
 * between a living session's tasks.
 *
 * @example
 * ```ts
 * const inbox = new Inbox()
 * const q = query({ prompt: inbox.messages(), options })
 * const uuid = inbox.send('Hello')
 * inbox.end() // Claude Code exits as after a one-shot prompt
 * ```
 */
export class Inbox {
  private readonly queue: SDKUserMessage[] = []
  private wake: (() => void) | null = null
  private ended = false

  /** Queue a user message; returns its uuid. */
  send(text: string): string {
    const uuid = randomUUID()
    this.queue.push({ type: 'user', uuid, message: { role: 'user', content: text }, parent_tool_use_id: null })
    this.wake?.()
    return uuid
  }

  /** No more messages: the input ends once the queued ones went. */
  end(): void {
    this.ended = true
    this.wake?.()
  }

  async *messages(): AsyncGenerator<SDKUserMessage> {
    for (;;) {
      while (this.queue.length) yield this.queue.shift()!
      if (this.ended) return
      await new Promise<void>((r) => (this.wake = r))
      this.wake = null
    }
  }
}
