/**
 * Start-up probe: with `BERTH_RUNNER_PROBE=1` the runner writes one stderr line per step,
 * `{"probe":"<step>","t":<epoch ms>}`, on the machine's wall clock (comparable across
 * processes on one host). Steps: `node` (process start), `imports`, `input`, `model`
 * (offline model listening), `spawn` (query called), `primed` (warm mode: Claude Code built its
 * system prompt and tools before any prompt), `ready`, `prompt` (warm mode: the prompt
 * arrived), `init` (Claude Code's init message), `request` (first model request),
 * `token` (first token line), `result`. Off by default: it costs nothing then.
 */
const enabled = process.env.BERTH_RUNNER_PROBE === '1'
const seen = new Set<string>()

/**
 * Record a step once (later calls with the same name are ignored).
 *
 * @example
 * ```ts
 * mark('imports')
 * ```
 */
export function mark(step: string, at: number = performance.timeOrigin + performance.now()): void {
  if (!enabled || seen.has(step)) return
  seen.add(step)
  process.stderr.write(`${JSON.stringify({ probe: step, t: at })}\n`)
}

mark('node', performance.timeOrigin)
