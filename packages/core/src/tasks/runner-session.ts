/** One run of the runner in a container: started (or handed to a warm agent), its stdout framed into events, its result. */
import { ApiError, type RunnerControl, type RunnerEvent, type RunnerInput, secretForms } from '@berth/contract'
import type { ContainerRuntime, ExecProcess } from '../ports/container-runtime.js'
import { runnerUser } from './runner-user.js'
import type { Logger } from '../ports/logger.js'
import { WORKSPACE_DIR } from './materialize.js'
import { RunnerStdin } from './runner-stdin.js'
import type { AgentProcess } from './agent-process.js'
import { lineFramer, MAX_LINE_CHARS, parseRunnerLine } from './runner-lines.js'

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

export interface RunnerRun {
  /** The task container's engine id. */
  engineId: string
  taskId: string
  input: RunnerInput
  signal: AbortSignal
  /** An agent to hand the prompt to (a warm one, or the session's living one) instead of starting the runner. */
  agent: AgentProcess | null
  /** The agent lives on after this task's result, for the session's next (see {@link AgentProcess.park}). */
  stay?: boolean
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
  /** The agent lives on after the result (parked for the session's next task; see {@link RunnerRun.stay}). */
  readonly staying: boolean
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
      proc = run.agent.handOff(
        { id: run.taskId, prompt: input.prompt, events_file: input.events_file },
        out,
        signal,
        run.stay === true,
      )
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
  // The agent was parked after the result: it lives on for the session's next task.
  let staying = false

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
          if (run.stay && run.agent && !run.agent.dead) {
            // A living agent: it waits for the session's next task (what it wrote after the result is kept for it).
            run.agent.park(ready.splice(0))
            staying = true
            return
          }
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
      // The run is over for the server: nothing more goes to the runner (a living agent's stdin stays open for its next task).
      done = true
      if (!staying) stdin?.close()
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
    get staying() {
      return staying
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
