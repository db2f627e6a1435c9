/**
 * The offline model's directive language: `[[berth:NAME ARGS]]` tags in a user prompt
 * script what the model answers, like a payment provider's test card numbers.
 */

/** One tool call a `[[berth:tool NAME JSON]]` directive asks for. */
export interface ToolDirective {
  name: string
  input: Record<string, unknown>
}

/** The API errors `[[berth:error KIND]]` can produce. */
export type ErrorKind = 'overloaded' | 'api' | 'invalid' | 'auth' | 'rate_limit'

/** What the directives of one prompt ask for; absent fields keep the default behaviour. */
export interface Script {
  /** Tool calls to make, one per turn, in order. */
  tools: ToolDirective[]
  /** Total number of tool-calling turns; padded with a harmless Bash call after `tools`. */
  turns?: number
  /** The final answer's text. */
  text?: string
  /** Answer with the first user prompt of the conversation. */
  recall: boolean
  /** `[[berth:recall_all]]`: answer with every earlier prompt of the conversation, oldest first. */
  recallAll?: boolean
  /** Usage reported for every response. */
  usage?: { input?: number; output?: number }
  /** Fail with this API error from turn `at` on (default 0: every request). */
  error?: { kind: ErrorKind; at: number }
  /** Milliseconds before each streamed delta. */
  slowMs?: number
  /** `[[berth:json VALUE]]`: answer with this value as structured output (the `StructuredOutput` tool when offered). */
  json?: unknown
  /** `[[berth:reply_last_user]]`: the final text quotes the latest message a person typed. */
  replyLastUser?: boolean
  /** `[[berth:echo_last_result]]`: the final text quotes the latest tool result (a denial's reason, say). */
  echoLastResult?: boolean
  /** `[[berth:notifications]]`: the final text lists the background-task notifications the conversation holds. */
  notifications?: boolean
}

const DIRECTIVE = /\[\[berth:([a-z_]+)(?:\s+([\s\S]*?))?\]\](?!\])/g
const ERROR_KINDS: readonly ErrorKind[] = ['overloaded', 'api', 'invalid', 'auth', 'rate_limit']

function parseKeyValues(args: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const m of args.matchAll(/([a-z_]+)=(\S+)/g)) out[m[1]!] = m[2]!
  return out
}

function toCount(raw: string | undefined, what: string): number {
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new DirectiveError(`${what} must be a non-negative integer, got "${raw}"`)
  return n
}

/** A directive that cannot be understood; the model answers it with `invalid_request_error`. */
export class DirectiveError extends Error {}

/**
 * Parse the directives in a prompt. Unknown directive names and malformed arguments throw
 * {@link DirectiveError}, so a typo in a test fails loudly instead of being ignored.
 *
 * @example
 * ```ts
 * parseScript('Do it [[berth:tool Bash {"command":"echo hi"}]] [[berth:text Done]]')
 * // { tools: [{ name: 'Bash', input: { command: 'echo hi' } }], text: 'Done', recall: false }
 * ```
 */
export function parseScript(prompt: string): Script {
  const script: Script = { tools: [], recall: false }
  for (const m of prompt.matchAll(DIRECTIVE)) {
    const name = m[1]!
    const args = (m[2] ?? '').trim()
    switch (name) {
      case 'tool': {
        const space = args.search(/\s/)
        const tool = space < 0 ? args : args.slice(0, space)
        const json = space < 0 ? '{}' : args.slice(space + 1).trim()
        if (!tool) throw new DirectiveError('[[berth:tool]] needs a tool name')
        let input: unknown
        try {
          input = JSON.parse(json)
        } catch {
          throw new DirectiveError(`[[berth:tool ${tool}]] input is not JSON: ${json}`)
        }
        if (typeof input !== 'object' || input === null || Array.isArray(input)) {
          throw new DirectiveError(`[[berth:tool ${tool}]] input must be a JSON object`)
        }
        script.tools.push({ name: tool, input: input as Record<string, unknown> })
        break
      }
      case 'turns':
        script.turns = toCount(args, '[[berth:turns N]]')
        break
      case 'text':
        script.text = args
        break
      case 'recall':
        script.recall = true
        break
      case 'usage': {
        const kv = parseKeyValues(args)
        script.usage = {
          input: kv.input === undefined ? undefined : toCount(kv.input, 'usage input'),
          output: kv.output === undefined ? undefined : toCount(kv.output, 'usage output'),
        }
        break
      }
      case 'error': {
        const [kind, ...rest] = args.split(/\s+/)
        if (!ERROR_KINDS.includes(kind as ErrorKind)) {
          throw new DirectiveError(`[[berth:error KIND]]: KIND is one of ${ERROR_KINDS.join(', ')}, got "${kind}"`)
        }
        const at = parseKeyValues(rest.join(' ')).at
        script.error = { kind: kind as ErrorKind, at: at === undefined ? 0 : toCount(at, 'error at') }
        break
      }
      case 'json':
        try {
          script.json = JSON.parse(args)
        } catch {
          throw new DirectiveError(`[[berth:json VALUE]]: VALUE is not JSON: ${args}`)
        }
        break
      case 'recall_all':
        script.recallAll = true
        break
      case 'reply_last_user':
        script.replyLastUser = true
        break
      case 'echo_last_result':
        script.echoLastResult = true
        break
      case 'notifications':
        script.notifications = true
        break
      case 'slow':
        script.slowMs = toCount(args, '[[berth:slow MS]]')
        break
      default:
        throw new DirectiveError(`unknown directive [[berth:${name}]]`)
    }
  }
  return script
}

/**
 * The prompt with its directives removed and whitespace tidied: what the model "read".
 *
 * @example
 * ```ts
 * stripDirectives('Hello [[berth:slow 5]] world') // 'Hello world'
 * ```
 */
export function stripDirectives(prompt: string): string {
  return prompt.replace(DIRECTIVE, ' ').replace(/\s+/g, ' ').trim()
}
