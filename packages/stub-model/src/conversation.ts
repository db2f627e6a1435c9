/**
 * Reading a Messages API request the way the offline model needs: where the latest user
 * prompt is, how many assistant turns answered it so far, and what the first prompt was.
 */
import { stripDirectives } from './directives.js'

/** A content block as the Messages API sends it (only the fields the model reads). */
export interface ContentBlock {
  type: string
  text?: string
  content?: unknown
  [key: string]: unknown
}

/** One message of a request's `messages`. */
export interface MessageParam {
  role: 'user' | 'assistant'
  content: string | ContentBlock[]
}

/** Where the conversation stands for the model. */
export interface ConversationState {
  /** The text of the latest user prompt (directives included), system reminders removed. */
  prompt: string
  /** Assistant messages after that prompt: 0 on the prompt's first turn, 1 after one tool round... */
  turn: number
  /** The text of the conversation's first user prompt. */
  firstPrompt: string
  /** The prompts before the latest one, oldest first, their directives removed. */
  earlierPrompts: string[]
  /** Total characters of the request's messages, for plausible `input_tokens`. */
  size: number
  /** The latest text a person typed anywhere in the conversation (a prompt, or a message sent beside tool results). */
  lastUserText: string
  /** The text of the latest tool result (e.g. a denial's reason), or '' when none. */
  lastToolResult: string
  /** The summaries of the background-task notifications Claude Code put in the conversation, oldest first. */
  notifications: string[]
}

const REMINDER = /<system-reminder>[\s\S]*?<\/system-reminder>/g

function blocks(content: MessageParam['content']): ContentBlock[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content
}

/** The text a person typed in a user message: text blocks without the harness's reminders. */
function typedText(message: MessageParam): string {
  return blocks(message.content)
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => (b.text as string).replace(REMINDER, '').trim())
    .filter(Boolean)
    .join('\n')
}

/**
 * A user message that carries a prompt, not just tool results the harness sends back. Claude
 * Code joins a prompt to the tool results of a turn it interrupted (a living session's next
 * task): typed text beside tool results is a prompt too.
 */
function isPrompt(message: MessageParam): boolean {
  if (message.role !== 'user') return false
  return typedText(message) !== ''
}

/**
 * Find the latest prompt, the turn within it and the first prompt of the conversation.
 * Directives are read from prompts only: never from tool results (a tool that prints
 * `[[berth:...]]` cannot steer the model) nor from `<system-reminder>` text.
 *
 * @example
 * ```ts
 * readConversation([{ role: 'user', content: 'hi' }]) // { prompt: 'hi', turn: 0, firstPrompt: 'hi', earlierPrompts: [], size: 2, … }
 * ```
 */
export function readConversation(messages: MessageParam[]): ConversationState {
  let last = -1
  let first = -1
  const prompts: number[] = []
  for (let i = 0; i < messages.length; i++) {
    if (!isPrompt(messages[i]!)) continue
    if (first < 0) first = i
    last = i
    prompts.push(i)
  }
  const earlierPrompts = prompts.slice(0, -1).map((i) => stripDirectives(typedText(messages[i]!)))
  const size = messages.reduce((n, m) => n + JSON.stringify(m.content).length, 0)
  const latest = {
    lastUserText: lastTyped(messages),
    lastToolResult: lastToolResult(messages),
    notifications: notificationsIn(messages),
  }
  if (last < 0) return { prompt: '', turn: 0, firstPrompt: '', earlierPrompts, size, ...latest }
  const turn = messages.slice(last + 1).filter((m) => m.role === 'assistant').length
  return {
    prompt: typedText(messages[last]!),
    turn,
    firstPrompt: typedText(messages[first]!),
    earlierPrompts,
    size,
    ...latest,
  }
}

const NOTIFICATION = /<task-notification>[\s\S]*?<summary>([\s\S]*?)<\/summary>[\s\S]*?<\/task-notification>/g

/** The summaries of `<task-notification>`s in user messages (Claude Code sends them as reminders). */
function notificationsIn(messages: MessageParam[]): string[] {
  return messages
    .filter((m) => m.role === 'user')
    .flatMap((m) => blocks(m.content))
    .flatMap((b) => (b.type === 'text' && typeof b.text === 'string' ? [...b.text.matchAll(NOTIFICATION)] : []))
    .map((x) => x[1]!.trim())
}

/** How Claude Code hands over a message sent mid-turn: a reminder beside the next tool result. */
const MID_TURN = /<system-reminder>\s*The user sent a new message while you were working:\n([\s\S]*?)\n\n/g

function lastTyped(messages: MessageParam[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role !== 'user') continue
    const midTurn = blocks(m.content)
      .filter((b) => b.type === 'tool_result')
      .flatMap((b) => [...resultText(b.content, true).matchAll(MID_TURN)].map((x) => x[1]!.trim()))
    if (midTurn.length) return midTurn.at(-1)!
    const text = typedText(m)
    if (text) return text
  }
  return ''
}

/** A tool result's text; without `reminders`, the harness's `<system-reminder>`s removed. */
function resultText(content: unknown, reminders = false): string {
  const clean = (t: string) => (reminders ? t : t.replace(REMINDER, '').trim())
  if (typeof content === 'string') return clean(content)
  if (!Array.isArray(content)) return ''
  return content
    .filter((b: ContentBlock) => b?.type === 'text' && typeof b.text === 'string')
    .map((b: ContentBlock) => clean(b.text as string))
    .join('\n')
}

function lastToolResult(messages: MessageParam[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.role !== 'user') continue
    const found = blocks(m.content).filter((b) => b.type === 'tool_result')
    if (found.length) return resultText(found.at(-1)!.content)
  }
  return ''
}
