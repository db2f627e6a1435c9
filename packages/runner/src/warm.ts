import { createInterface } from 'node:readline'
import * as v from 'valibot'
import { InputError } from './input.js'
import type { TaskPrompt } from './run.js'
import type { Steering } from './steer.js'

/** The stderr line a warm runner writes once Claude Code is up and waits for the prompt. */
export const WARM_READY = '{"warm":"ready"}'

/** The second line a warm runner reads: the task it serves. */
const PromptLine = v.object({
  type: v.literal('prompt'),
  task_id: v.string(),
  prompt: v.string(),
  events_file: v.string(),
})

/** Stdin, one line at a time: `next()` is null once it ended. */
export interface LineReader {
  next(): Promise<string | null>
}

/**
 * Read a stream line by line (stdin stays open while the run goes on: no `readAll`).
 *
 * @example
 * ```ts
 * const lines = lineReader(process.stdin)
 * const first = await lines.next()
 * ```
 */
export function lineReader(stream: NodeJS.ReadableStream): LineReader {
  const it = createInterface({ input: stream, crlfDelay: Infinity })[Symbol.asyncIterator]()
  let ended = false
  return {
    async next() {
      if (ended) return null
      const { value, done } = await it.next()
      if (done) ended = true
      return done ? null : (value as string)
    },
  }
}

/**
 * A cold runner's input: the first line holding a JSON document. An older server writes
 * one document (perhaps over several lines) and closes stdin, so lines are joined until
 * they parse or stdin ends (then the text goes to `parseInput`, which says what is wrong).
 *
 * @example
 * ```ts
 * const input = parseInput(await readFirstDocument(lineReader(process.stdin)))
 * ```
 */
export async function readFirstDocument(lines: LineReader): Promise<string> {
  let text = ''
  for (let line = await lines.next(); line !== null; line = await lines.next()) {
    text = text ? `${text}\n${line}` : line
    if (!text.trim()) continue
    try {
      JSON.parse(text)
      return text
    } catch {
      // Not a whole document yet.
    }
  }
  return text
}

/**
 * Feed the control lines after the input to `steer` until stdin ends.
 *
 * @example
 * ```ts
 * void pumpControls(lines, steer)
 * ```
 */
export async function pumpControls(lines: LineReader, steer: Steering): Promise<void> {
  for (let line = await lines.next(); line !== null; line = await lines.next()) steer.line(line)
}

/** The two lines of a warm runner's stdin. */
export interface WarmLines {
  /** The first line, `{"type":"init","input":RunnerInput}`, as the RunnerInput's JSON text. */
  init: Promise<string>
  /** The second line, `{"type":"prompt","task_id","prompt","events_file"}`. Rejects when stdin ends first. */
  prompt: Promise<TaskPrompt & { events_file: string }>
}

/**
 * Read a warm runner's stdin: an `init` line (a RunnerInput whose `task_id` and `prompt`
 * are placeholders) as soon as it comes, then, possibly much later, the `prompt` line.
 * Control lines follow (see {@link pumpControls}).
 *
 * @example
 * ```ts
 * const { init, prompt } = readWarmLines(lineReader(process.stdin))
 * const input = parseInput(await init)
 * await runTask(input, { ...opts, prompt })
 * ```
 */
export function readWarmLines(lines: LineReader): WarmLines {
  const next = async (what: string): Promise<unknown> => {
    const value = await lines.next()
    if (value === null) throw new InputError(`stdin ended before the ${what} line`)
    try {
      return JSON.parse(value)
    } catch (err) {
      throw new InputError(`the ${what} line is not JSON: ${(err as Error).message}`)
    }
  }
  const init = next('init').then((line) => {
    if (!line || typeof line !== 'object' || (line as { type?: unknown }).type !== 'init')
      throw new InputError('the first line must be {"type":"init","input":...}')
    return JSON.stringify((line as { input?: unknown }).input ?? null)
  })
  const prompt = init
    .then(() => next('prompt'))
    .then((line) => {
      const parsed = v.safeParse(PromptLine, line)
      if (!parsed.success)
        throw new InputError(`invalid prompt line: ${parsed.issues.map((i) => i.message).join('; ')}`)
      return { task_id: parsed.output.task_id, prompt: parsed.output.prompt, events_file: parsed.output.events_file }
    })
  prompt.catch(() => {})
  return { init, prompt }
}
