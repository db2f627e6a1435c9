/** An agent runner in a container (`berth-runner --warm`): Claude Code up with its input open, handed tasks one at a time. */
import { createHash } from 'node:crypto'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import type { ContainerRuntime, ExecProcess } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Lease } from '../runtime/index.js'
import type { Store } from '../ports/store.js'
import { bindSubject, RunTokens } from './run-tokens.js'
import { lineFramer, parseRunnerLine } from './runner-lines.js'
import { RunnerStdin } from './runner-stdin.js'
import { runnerUser } from './runner-user.js'

/** Where an agent's output goes while a task has it. */
export interface AgentOutput {
  onStdout: (chunk: Uint8Array) => void
  onStderr: (chunk: Uint8Array) => void
}

/** What a task hands an agent. */
export interface AgentTask {
  id: string
  prompt: string
  events_file: string
}

/**
 * A runner whose Claude Code is up (or starting) in a claimed container, waiting for a task:
 * a warm agent parked for the next task like its input, or a session's living agent
 * between follow-ups.
 */
export interface AgentProcess {
  key: string
  lease: Lease
  /** Claude Code is up and waits for the prompt (false: it is still starting). */
  readonly ready: boolean
  /** The runner has exited (or was killed). */
  readonly dead: boolean
  /** When the runner was started (ISO 8601). */
  readonly since: string
  /** Tasks handed to it so far. */
  readonly tasks: number
  /** The runner's stdin: the task's control lines go here while it has the agent. */
  stdin: RunnerStdin
  /** Settles once the runner exited. */
  readonly exited: Promise<unknown>
  /**
   * Hand a task's prompt to the agent: its output goes to `out` from now on (anything it
   * wrote while waiting first), and `signal` kills it. `stay`: the agent takes another task
   * after this one's result (see {@link AgentProcess.park}). Returns the runner's process.
   */
  handOff(task: AgentTask, out: AgentOutput, signal: AbortSignal, stay: boolean): ExecProcess
  /**
   * A staying task's result is in: the agent waits for its next task, and the task's signal
   * no longer kills it. Its output from now on (events of no task: background work starting
   * or ending), after `leftover` (what came after the result), is kept for {@link AgentProcess.listen}.
   */
  park(leftover?: RunnerEvent[]): void
  /** Where the events of no task go while the agent waits (those kept so far first). */
  listen(onEvent: (event: RunnerEvent) => void): void
  /** End the agent: stdin closes (its background work is stopped, Claude Code exits), killed after `graceMs`. */
  end(graceMs?: number): Promise<void>
}

export interface AgentProcessOptions {
  runtime: ContainerRuntime
  /** The runner's command; `--warm` is appended. */
  command: string[]
  logger: Logger
  /** Working directory of the runner (the workspace). */
  cwd: string
  lease: Lease
  key: string
  /** The runner input the agent starts with (its task id, prompt and events file are placeholders). */
  input: RunnerInput
  /** With a credential broker: the agent's token is its own, bound to each task that takes it in `store`. */
  tokens?: { issuer: RunTokens; store: Store } | undefined
}

/** What a warm runner writes on stderr once Claude Code waits for the prompt. */
const READY_LINE = '{"warm":"ready"}'

/**
 * What fixes an agent at start: the owner and the whole runner input except what only the
 * task brings (its id, prompt and events file). Profile settings, tools, MCP servers,
 * model and credential, secrets (as env and redactions), skills, agents, limits and the
 * conversation to resume all count, so a task whose input differs in any of them never
 * meets an agent started for another.
 *
 * @example
 * ```ts
 * warmKey(owner, input) === warmKey(owner, { ...input, task_id: 'other', prompt: 'other' }) // true
 * ```
 */
export function warmKey(owner: string, input: RunnerInput): string {
  // The capability token is the run's own (an agent gets one of its own): not a setting.
  const { task_id: _t, prompt: _p, events_file: _e, broker, ...fixed } = input
  const brokerSetting = broker && { ...broker, token: null }
  return createHash('sha256')
    .update(JSON.stringify([owner, fixed, brokerSetting ?? null]))
    .digest('hex')
}

/**
 * {@link warmKey} of a session's living agent: the conversation it holds is the one a
 * follow-up would resume, so `resume` does not count; anything else that differs (a changed
 * profile, memory, a refreshed Git token) needs an agent started anew.
 *
 * @example
 * ```ts
 * livingKey(owner, { ...input, resume: 'sess_1' }) === livingKey(owner, { ...input, resume: null }) // true
 * ```
 */
export function livingKey(owner: string, input: RunnerInput): string {
  return warmKey(owner, { ...input, resume: null })
}

/**
 * Whether an agent may live on between a session's tasks: only where the runner reaches
 * the model through a port of its own it can shut between tasks (the offline model, or the
 * broker's gateway), so no model call happens outside a task. A profile whose key goes
 * to the container (the broker off) runs each follow-up in a new agent, as before.
 *
 * @example
 * ```ts
 * canLive({ ...input, broker: null, model: { ...input.model, provider: 'anthropic' } }) // false
 * ```
 */
export function canLive(input: RunnerInput): boolean {
  return input.model.provider === 'stub' || Boolean(input.broker)
}

/**
 * Exec `berth-runner --warm` in the lease's container with `input` as its init line: Claude
 * Code starts at once and waits for a task ({@link AgentProcess.handOff}). Output before the
 * first task is kept for it; an agent whose runner ends is `dead`.
 *
 * @example
 * ```ts
 * const agent = await startAgentProcess({ runtime, command, logger, cwd: '/workspace', lease, key, input })
 * const proc = agent.handOff(task, out, signal, true)
 * ```
 */
export async function startAgentProcess(o: AgentProcessOptions): Promise<AgentProcess> {
  const { input, tokens } = o
  // The token of the task this input was made for would die with that task: the agent gets its own.
  const subject = RunTokens.warmSubject()
  const broker = input.broker && tokens && { ...input.broker, token: tokens.issuer.issue(subject) }
  // Stdin stays open: the init line now, a prompt line per task with its control lines after.
  const stdin = new RunnerStdin()
  stdin.line(
    JSON.stringify({ type: 'init', input: { ...input, task_id: 'warm', prompt: '', ...(broker && { broker }) } }),
  )
  // Until a task takes it, output is kept (a crash message, probe lines) for that task.
  let out: AgentOutput | null = null
  let early: { stream: 'out' | 'err'; chunk: Uint8Array }[] = []
  let errText = ''
  // Claude Code may say it is up before exec returns: the flag lives here, the agent reads it.
  let ready = false
  let dead = false
  let tasks = 0
  let detachSignal: (() => void) | null = null
  // Between tasks: events of no task, framed from stdout.
  let idle: ((chunk: Uint8Array) => void) | null = null
  let kept: RunnerEvent[] = []
  let listener: ((event: RunnerEvent) => void) | null = null
  const waitingErr = (chunk: Uint8Array) => {
    early.push({ stream: 'err', chunk })
    errText = (errText + Buffer.from(chunk).toString('utf8')).slice(-4000)
    if (errText.includes(READY_LINE)) ready = true
  }
  const proc = await o.runtime.exec(o.lease.container.engine_id, {
    cmd: [...o.command, '--warm'],
    cwd: o.cwd,
    ...runnerUser(o.runtime),
    stdin: stdin.lines(),
    onStdout: (chunk) => (out ? out.onStdout(chunk) : idle ? idle(chunk) : early.push({ stream: 'out', chunk })),
    // Between tasks stderr is the runner's own (probe lines, Claude Code's debug): dropped.
    onStderr: (chunk) => (out ? out.onStderr(chunk) : idle ? undefined : waitingErr(chunk)),
  })
  const exited = proc.exit
    .catch(() => null)
    .then(() => {
      dead = true
      stdin.close()
    })
  const kill = () => void proc.kill().catch(() => {})
  let ending: Promise<void> | null = null
  return {
    key: o.key,
    lease: o.lease,
    stdin,
    exited,
    since: new Date().toISOString(),
    get ready() {
      return ready
    },
    get dead() {
      return dead
    },
    get tasks() {
      return tasks
    },
    handOff(task, to, signal, stay) {
      tasks++
      idle = null
      for (const e of early.splice(0)) (e.stream === 'out' ? to.onStdout : to.onStderr)(e.chunk)
      early = []
      out = to
      const prompt = JSON.stringify({
        type: 'prompt',
        task_id: task.id,
        prompt: task.prompt,
        events_file: task.events_file,
        ...(stay && { stay: true }),
      })
      // The agent's token speaks for the task before the agent learns it has one; a failed
      // binding shows as the model refusing the token, so the task fails rather than hangs.
      // The prompt keeps its place before any control line the run sends meanwhile.
      if (broker && tokens) {
        stdin.line(
          bindSubject(tokens.store, subject, task.id)
            .catch((err: unknown) => o.logger.warn('could not bind an agent to its task', { error: String(err) }))
            .then(() => prompt),
        )
      } else stdin.line(prompt)
      if (signal.aborted) kill()
      else {
        signal.addEventListener('abort', kill, { once: true })
        detachSignal = () => signal.removeEventListener('abort', kill)
      }
      void exited.finally(() => detachSignal?.())
      return proc
    },
    park(leftover = []) {
      detachSignal?.()
      detachSignal = null
      out = null
      kept = [...leftover]
      listener = null
      const lines = lineFramer((line) => {
        if (!line.trim()) return
        const event = parseRunnerLine(line)
        if (typeof event === 'string')
          o.logger.warn('a living agent wrote a line that is not an event between tasks', { problem: event })
        else if (listener) listener(event)
        else kept.push(event)
      })
      idle = (chunk) => lines.push(chunk)
    },
    listen(onEvent) {
      listener = onEvent
      for (const e of kept.splice(0)) onEvent(e)
    },
    end(graceMs = 10_000) {
      ending ??= (async () => {
        stdin.close()
        const timer = setTimeout(kill, graceMs)
        timer.unref?.()
        await exited
        clearTimeout(timer)
      })()
      return ending
    },
  }
}
