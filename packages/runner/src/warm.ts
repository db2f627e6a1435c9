import { createInterface } from 'node:readline'
import * as v from 'valibot'
import { InputError } from './input.js'
import type { Steering } from './steer.js'

/** What a warm runner learns only when its task arrives. */
export interface TaskPrompt {
  task_id: string
  prompt: string
}

/** The stderr line a warm runner writes once Claude Code is up and waits for the prompt. */
export const WARM_READY = '{"warm":"ready"}'

/** A line after the init line that hands a warm runner a task. */
const PromptLineSchema = v.object({
  type: v.literal('prompt'),
  task_id: v.string(),
  prompt: v.string(),
  events_file: v.string(),
  /** Take another prompt after this task (a living session's agent). */
  stay: v.optional(v.boolean()),
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

/** One task a warm runner takes: the prompt line. */
export type PromptLine = TaskPrompt & { events_file: string; stay: boolean }

/** A warm runner's stdin: the `init` line, then prompt lines with each task's control lines after its own. */
export interface WarmLines {
  /** The first line, `{"type":"init","input":RunnerInput}`, as the RunnerInput's JSON text. */
  init: Promise<string>
  /** The next `{"type":"prompt","task_id","prompt","events_file","stay"?}` line; null once stdin ended. Rejects on an invalid one. */
  next(): Promise<PromptLine | null>
}

/**
 * Read a warm runner's stdin: an `init` line (a RunnerInput whose `task_id` and `prompt`
 * are placeholders) as soon as it comes, then, possibly much later, a `prompt` line per
 * task; every other line is a control line of the task under way, handed to `control`.
 * With `stay: true` the runner takes another prompt line after the task's result (a living
 * session's agent); without, it ends after it.
 *
 * @example
 * ```ts
 * const warm = readWarmLines(lineReader(process.stdin), (line) => steer?.line(line))
 * const input = parseInput(await warm.init)
 * for (let p = await warm.next(); p; p = await warm.next()) await agent.run(...)
 * ```
 */
export function readWarmLines(lines: LineReader, control: (line: string) => void): WarmLines {
  const init = lines.next().then((value) => {
    if (value === null) throw new InputError('stdin ended before the init line')
    let line: unknown
    try {
      line = JSON.parse(value)
    } catch (err) {
      throw new InputError(`the init line is not JSON: ${(err as Error).message}`)
    }
    if (!line || typeof line !== 'object' || (line as { type?: unknown }).type !== 'init')
      throw new InputError('the first line must be {"type":"init","input":...}')
    return JSON.stringify((line as { input?: unknown }).input ?? null)
  })
  init.catch(() => {})
  const prompts: (PromptLine | InputError | null)[] = []
  let wake: (() => void) | null = null
  const put = (p: PromptLine | InputError | null) => {
    prompts.push(p)
    wake?.()
  }
  void init.then(
    async () => {
      for (let line = await lines.next(); line !== null; line = await lines.next()) {
        const prompt = promptOf(line)
        if (prompt) put(prompt)
        else control(line)
      }
      put(null)
    },
    () => put(null),
  )
  return {
    init,
    async next() {
      while (prompts.length === 0) await new Promise<void>((r) => (wake = r))
      const p = prompts.shift()!
      // Stdin ended: every later call says so too.
      if (p === null) prompts.unshift(null)
      if (p instanceof InputError) throw p
      return p
    },
  }
}

/** A prompt line (or why it is an invalid one); null for any other line (a control line). */
function promptOf(line: string): PromptLine | InputError | null {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return null
  }
  if (!json || typeof json !== 'object' || (json as { type?: unknown }).type !== 'prompt') return null
  const parsed = v.safeParse(PromptLineSchema, json)
  if (!parsed.success) return new InputError(`invalid prompt line: ${parsed.issues.map((i) => i.message).join('; ')}`)
  const { task_id, prompt, events_file, stay } = parsed.output
  return { task_id, prompt, events_file, stay: stay === true }
}
