/** One run of the runner in a container: started (or handed to a warm agent), its stdout framed into events, its result. */
import * as v from 'valibot'
import { ApiError, RunnerEvent, type RunnerControl, type RunnerInput, secretForms } from '@berth/contract'
import type { ContainerRuntime, ExecProcess } from '../ports/container-runtime.js'
import { runnerUser } from './runner-user.js'
import type { Logger } from '../ports/logger.js'
import { WORKSPACE_DIR } from './materialize.js'
import { RunnerStdin } from './runner-stdin.js'
import type { WarmAgent } from './warm-agents.js'

/** How long a runner may take to exit after writing its result before it is killed. */
const RUNNER_EXIT_GRACE_MS = 10_000

/**
 * Redaction on the server's side, of text a runner left (its stderr tail): `text` with
 * every value of `values`, and each of its encoded forms ({@link secretForms}), replaced by
 * `[REDACTED]` (longest first, so a form inside another goes with it).
 *
 * @example
 * ```ts
 * redactAll('token=s3cret-value', ['s3cret-value']) // 'token=[REDACTED]'
 * ```
 */
export function redactAll(text: string, values: string[]): string {
  let out = text
  const forms = [...new Set(values.flatMap(secretForms))].sort((a, b) => b.length - a.length)
  for (const v of forms) if (v) out = out.split(v).join('[REDACTED]')
  return out
}

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

export interface RunnerRun {
  /** The task container's engine id. */
  engineId: string
  taskId: string
  input: RunnerInput
  signal: AbortSignal
  /** A warm agent to hand the prompt to instead of starting the runner. */
  agent: WarmAgent | null
}

/** A runner's events as they come, ending on its result; `exited` is its exit after that. */
export interface RunnerSession extends AsyncIterable<RunnerEvent> {
  /** The runner's exit once the result came (a runner that hangs after it is killed after a grace period). */
  readonly exited: Promise<unknown>
  /**
   * Write a control line on the runner's stdin (kept until the runner is started, in
   * order); false once the run has ended.
   */
  send(control: RunnerControl): boolean
  /** The run ends without its events having been read: the runner (started already) is killed. */
  close(): void
}

/**
 * Exec the runner (input as one JSON line on stdin, or the prompt handed to a warm agent)
 * at once, and iterate its stdout's events in order. Stdin stays open for control lines
 * ({@link RunnerSession.send}) until the run ends. The iteration ends on the result event; a
 * runner that ends without one throws CONTAINER_FAILED with the (redacted) tail of its
 * stderr; an abort of `run.signal` kills the runner and throws its reason.
 *
 * @example
 * ```ts
 * const session = runnerEvents({ runtime, command: ['berth-runner'], logger }, { engineId, taskId, input, signal, agent: null })
 * for await (const event of session) await record(event)
 * await session.exited
 * ```
 */
export function runnerEvents(
  deps: { runtime: ContainerRuntime; command: string[]; logger: Logger },
  run: RunnerRun,
): RunnerSession {
  const { input, signal } = run
  let exited: Promise<unknown> = Promise.resolve()
  // Control lines sent before the runner has its input wait here, then follow it.
  let stdin: RunnerStdin | null = null
  const early: RunnerControl[] = []
  let done = false
  const start = (to: RunnerStdin) => {
    stdin = to
    for (const control of early.splice(0)) to.send(control)
  }
  // The runner starts now, not when its events are first read: the caller's own writes
  // (the task's `running` status) overlap the exec or the hand-off to a warm agent. Its
  // events wait in `ready` until they are read.
  const ready: RunnerEvent[] = []
  let wake: (() => void) | null = null
  const notify = () => {
    wake?.()
    wake = null
  }
  // The first protocol violation: the run ends on it (the runner's output cannot be trusted after it).
  let broken: string | null = null
  const violation = (what: string, fields: Record<string, unknown> = {}) => {
    deps.logger.warn(`runner broke its protocol: ${what}`, { task: run.taskId, ...fields })
    broken ??= what
    notify()
  }
  const lines = lineFramer(
    (line) => {
      if (broken || !line.trim()) return
      const event = parseRunnerLine(line)
      if (typeof event === 'string')
        return violation(event === 'not json' ? 'a line that is not JSON' : 'an unknown event')
      ready.push(event)
      notify()
    },
    {
      onOversize: (chars) =>
        violation(`a line over ${MAX_LINE_CHARS} characters (dropped)`, { chars, limit: MAX_LINE_CHARS }),
    },
  )
  let stderr = ''
  const out = {
    onStdout: (chunk: Uint8Array) => lines.push(chunk),
    onStderr: (chunk: Uint8Array) => {
      stderr = (stderr + Buffer.from(chunk).toString('utf8')).slice(-4000)
    },
  }
  let ended: { exitCode: number | null } | { error: unknown } | null = null
  const starting = (async (): Promise<ExecProcess> => {
    let proc: ExecProcess
    if (run.agent) {
      proc = run.agent.handOff({ id: run.taskId, prompt: input.prompt, events_file: input.events_file }, out, signal)
      start(run.agent.stdin)
    } else {
      const cold = new RunnerStdin()
      cold.line(JSON.stringify(input))
      start(cold)
      proc = await deps.runtime.exec(run.engineId, {
        cmd: deps.command,
        cwd: WORKSPACE_DIR,
        ...runnerUser(deps.runtime),
        stdin: cold.lines(),
        signal,
        ...out,
      })
    }
    void proc.exit.then(
      (e) => {
        lines.end()
        ended = { exitCode: e.exitCode }
        notify()
      },
      (error: unknown) => {
        ended = { error }
        notify()
      },
    )
    return proc
  })()
  // A failed start is thrown where the events are read.
  starting.catch(() => {})
  let reading = false

  async function* events(): AsyncGenerator<RunnerEvent> {
    reading = true
    const proc = await starting
    let sawResult = false
    try {
      for (;;) {
        while (ready.length) {
          const event = ready.shift()!
          yield event
          if (event.type !== 'result') continue
          sawResult = true
          signal.throwIfAborted()
          // A runner that hangs after its result is killed rather than holding the workspace.
          exited = new Promise<void>((resolve) => {
            const timer = setTimeout(() => void proc.kill().catch(() => {}), RUNNER_EXIT_GRACE_MS)
            timer.unref?.()
            proc.exit
              .then(
                () => resolve(),
                () => resolve(),
              )
              .finally(() => clearTimeout(timer))
          })
          return
        }
        if (broken)
          throw new ApiError('CONTAINER_FAILED', `The agent runner broke its protocol: ${broken}; the task was stopped`)
        if (ended) break
        await new Promise<void>((r) => (wake = r))
      }
    } finally {
      // The run is over for the server: nothing more goes to the runner.
      done = true
      stdin?.close()
      // The consumer stopped early (its recording failed): the runner goes too.
      if (!sawResult && !ended) void proc.kill().catch(() => {})
    }
    signal.throwIfAborted()
    const end = ended as { exitCode: number | null } | { error: unknown }
    if ('error' in end) throw end.error
    const exitCode = end.exitCode
    throw new ApiError(
      'CONTAINER_FAILED',
      `The agent runner ended without a result (exit code ${exitCode ?? 'unknown'})`,
      {
        exit_code: exitCode,
        stderr_tail: redactAll(stderr.slice(-1000), input.redact),
      },
    )
  }
  return {
    get exited() {
      return exited
    },
    close() {
      if (reading || done) return
      done = true
      stdin?.close()
      void starting.then((proc) => proc.kill()).catch(() => {})
    },
    send(control) {
      if (done) return false
      if (!stdin) early.push(control)
      else if (!stdin.send(control)) return false
      return true
    },
    [Symbol.asyncIterator]: events,
  }
}
