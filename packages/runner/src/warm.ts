import { createInterface } from 'node:readline'
import * as v from 'valibot'
import { InputError } from './input.js'
import type { TaskPrompt } from './run.js'

/** The stderr line a warm runner writes once Claude Code is up and waits for the prompt. */
export const WARM_READY = '{"warm":"ready"}'

/** The second line a warm runner reads: the task it serves. */
const PromptLine = v.object({
  type: v.literal('prompt'),
  task_id: v.string(),
  prompt: v.string(),
  events_file: v.string(),
})

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
 *
 * @example
 * ```ts
 * const { init, prompt } = readWarmLines(process.stdin)
 * const input = parseInput(await init)
 * await runTask(input, { ...opts, prompt })
 * ```
 */
export function readWarmLines(stream: NodeJS.ReadableStream): WarmLines {
  // Not `readAll`: stdin stays open while the runner waits for its prompt.
  const lines = createInterface({ input: stream, crlfDelay: Infinity })[Symbol.asyncIterator]()
  const next = async (what: string): Promise<unknown> => {
    const { value, done } = await lines.next()
    if (done) throw new InputError(`stdin ended before the ${what} line`)
    try {
      return JSON.parse(value as string)
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
