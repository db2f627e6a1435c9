/** One run of the runner in a container: started (or handed to a warm agent), its stdout framed into events, its result. */
import * as v from 'valibot'
import { ApiError, RunnerEvent, type RunnerInput } from '@berth/contract'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import { WORKSPACE_DIR } from './materialize.js'
import type { ResultEvent } from './record.js'
import { redactAll } from './redaction.js'
import type { WarmAgent } from './warm-agents.js'

/** How long a runner may take to exit after writing its result before it is killed. */
const RUNNER_EXIT_GRACE_MS = 10_000

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

/**
 * Frames a byte stream into lines: `push` each chunk, `end` for what follows the last newline.
 *
 * @example
 * ```ts
 * const lines = lineFramer((line) => console.log(line))
 * lines.push(new TextEncoder().encode('{"a":1}\n{"b"'))
 * lines.end()
 * ```
 */
export function lineFramer(onLine: (line: string) => void): { push(chunk: Uint8Array): void; end(): void } {
  const decoder = new TextDecoder()
  let pending = ''
  return {
    push(chunk) {
      pending += decoder.decode(chunk, { stream: true })
      let nl: number
      while ((nl = pending.indexOf('\n')) >= 0) {
        onLine(pending.slice(0, nl))
        pending = pending.slice(nl + 1)
      }
    },
    end() {
      onLine(pending)
      pending = ''
    },
  }
}

export interface RunnerRun {
  /** The task container's engine id. */
  engineId: string
  taskId: string
  input: RunnerInput
  signal: AbortSignal
  /** A warm agent to hand the prompt to instead of starting the runner. */
  agent: WarmAgent | null
  /** Store and publish events, in the order they came. */
  record(events: RunnerEvent[]): Promise<void>
}

/**
 * Exec the runner (input as one JSON line on stdin) and turn its stdout lines into stored
 * events. Resolves on the result event, with `exited` for the runner's exit (a runner that
 * hangs after its result is killed); a runner that ends without one is CONTAINER_FAILED,
 * with the (redacted) tail of its stderr.
 *
 * @example
 * ```ts
 * const { result, exited } = await runRunner({ runtime, command: ['berth-runner'], logger }, { engineId, taskId, input, signal, agent: null, record })
 * ```
 */
export async function runRunner(
  deps: { runtime: ContainerRuntime; command: string[]; logger: Logger },
  run: RunnerRun,
): Promise<{ result: ResultEvent; exited: Promise<unknown> }> {
  const { input, signal } = run
  let result: ResultEvent | null = null
  let sawResult!: () => void
  const resultSeen = new Promise<null>((r) => (sawResult = () => r(null)))
  let stderr = ''
  let chain = Promise.resolve()
  const lines = lineFramer((line) => {
    if (!line.trim()) return
    const event = parseRunnerLine(line)
    if (typeof event === 'string') {
      deps.logger.warn(event === 'not json' ? 'runner wrote a line that is not JSON' : 'runner wrote an unknown event', { task: run.taskId })
      return
    }
    if (event.type === 'result') {
      result = event
      sawResult()
    }
    chain = chain.then(() => run.record([event]))
  })
  const out = {
    onStdout: (chunk: Uint8Array) => lines.push(chunk),
    onStderr: (chunk: Uint8Array) => {
      stderr = (stderr + Buffer.from(chunk).toString('utf8')).slice(-4000)
    },
  }
  const proc = run.agent
    ? run.agent.handOff({ id: run.taskId, prompt: input.prompt, events_file: input.events_file }, out, signal)
    : await deps.runtime.exec(run.engineId, { cmd: deps.command, cwd: WORKSPACE_DIR, stdin: `${JSON.stringify(input)}\n`, signal, ...out })
  const ended = await Promise.race([proc.exit, resultSeen])
  if (ended === null) {
    await chain
    signal.throwIfAborted()
    // A runner that hangs after its result is killed rather than holding the workspace.
    const exited = new Promise<void>((resolve) => {
      const timer = setTimeout(() => void proc.kill().catch(() => {}), RUNNER_EXIT_GRACE_MS)
      timer.unref?.()
      proc.exit.then(
        () => resolve(),
        () => resolve(),
      ).finally(() => clearTimeout(timer))
    })
    return { result: result!, exited }
  }
  lines.end()
  await chain
  signal.throwIfAborted()
  if (!result) {
    throw new ApiError('CONTAINER_FAILED', `The agent runner ended without a result (exit code ${ended.exitCode ?? 'unknown'})`, {
      exit_code: ended.exitCode,
      stderr_tail: redactAll(stderr.slice(-1000), input.redact),
    })
  }
  return { result, exited: proc.exit }
}
