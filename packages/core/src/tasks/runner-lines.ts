/** The runner's output as lines and events: the framing and parsing every reader of it shares. */
import * as v from 'valibot'
import { RunnerEvent } from '@berth/contract'

/**
 * A line of the runner's output: an event, or why it is none.
 *
 * @example
 * ```ts
 * parseRunnerLine('{"type":"token","text":"Hi"}') // { type: 'token', text: 'Hi' }
 * parseRunnerLine('oops')                          // 'not json'
 * ```
 */
export function parseRunnerLine(line: string): RunnerEvent | 'not json' | 'unknown event' {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    return 'not json'
  }
  const event = v.safeParse(RunnerEvent, parsed)
  return event.success ? event.output : 'unknown event'
}

/** The longest line the runner may write (one event); a longer one is dropped with a warning. */
export const MAX_LINE_CHARS = 16 * 1024 * 1024

/**
 * Frames a byte stream into lines: `push` each chunk, `end` for what follows the last newline.
 * Each byte is scanned once however long the line (the scan resumes where the last chunk
 * ended); a line longer than `maxChars` is dropped up to its newline, `onOversize` told.
 *
 * @example
 * ```ts
 * const lines = lineFramer((line) => console.log(line))
 * lines.push(new TextEncoder().encode('{"a":1}\n{"b"'))
 * lines.end()
 * ```
 */
export function lineFramer(
  onLine: (line: string) => void,
  opts: { maxChars?: number; onOversize?: (chars: number) => void } = {},
): { push(chunk: Uint8Array): void; end(): void } {
  const max = opts.maxChars ?? MAX_LINE_CHARS
  const decoder = new TextDecoder()
  let pending = ''
  /** Where the newline search resumes: `pending` before it holds none. */
  let scanned = 0
  /** Characters of an oversized line dropped so far (its newline not seen yet). */
  let dropped = 0
  return {
    push(chunk) {
      pending += decoder.decode(chunk, { stream: true })
      let start = 0
      const nextNewline = () => pending.indexOf('\n', Math.max(scanned, start))
      for (let nl = nextNewline(); nl >= 0; nl = nextNewline()) {
        if (dropped > 0 || nl - start > max) {
          opts.onOversize?.(dropped + nl - start)
          dropped = 0
        } else onLine(pending.slice(start, nl))
        start = nl + 1
      }
      pending = pending.slice(start)
      scanned = pending.length
      if (pending.length > max || dropped > 0) {
        // Keep no more of an oversized line than its length: its newline ends the drop.
        dropped += pending.length
        pending = ''
        scanned = 0
      }
    },
    end() {
      if (dropped > 0) opts.onOversize?.(dropped + pending.length)
      else onLine(pending)
      pending = ''
      scanned = 0
      dropped = 0
    },
  }
}
