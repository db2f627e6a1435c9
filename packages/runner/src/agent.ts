import { join } from 'node:path'
import { query, type Query, type SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { approvalGate } from './approvals.js'
import { openBroker, type BrokerAccess } from './broker.js'
import { giveToAgent, type AgentUser } from './agent-user.js'
import { forwarder, ModelGate, urlOf } from './gate.js'
import { setupGitCredentials, type GitCredentialSetup } from './git-credentials.js'
import { Inbox } from './inbox.js'
import { sdkOptions } from './options.js'
import type { Redactor } from './redact.js'
import { mark } from './probe.js'
import { TaskTurn, type TaskRun } from './task-turn.js'
import { TurnWatch } from './turn.js'
import { writeSkills } from './workspace.js'

export type { TaskRun } from './task-turn.js'

/** What {@link startAgent} needs besides the input. */
export interface AgentOptions {
  redactor: Redactor
  /** Aborting cancels the task under way (its result says `cancelled`) and ends the agent. */
  signal?: AbortSignal
  /** Claude Code's stderr, redacted (default: dropped). */
  stderr?: (text: string) => void
  /** Start Claude Code as this user, and hand it what the run writes for it (`agent-user.ts`). */
  agentUser?: AgentUser | null
  /** Claude Code is up and waits for a prompt (its system prompt and tools built). */
  onReady?: () => void
  /** Events that belong to no task: a background task that started or ended between two tasks. */
  idle?: (event: RunnerEvent) => void
  /** How long to wait for the SDK to wind down after a cancel before giving up on it. */
  cancelGraceMs?: number
  /** How long an interrupted turn may take to wind down before Claude Code is stopped. */
  interruptGraceMs?: number
  /** How long the SDK's result may lag behind the agent's final message while background work runs. */
  heldResultGraceMs?: number
  /** How long Claude Code may take to exit once asked to before it (and its tools) are stopped. */
  exitGraceMs?: number
}

/** One Claude Code process, kept for one task or, in a living session, for many. */
export interface Agent {
  /**
   * Run one task: its prompt and the agent's turns until the turn is over, its result
   * emitted last. `stay`: the agent takes the next task after it (its background work runs
   * on); otherwise it is ended before the result goes out. Resolves with whether it can
   * take another task.
   */
  run(task: TaskRun, stay: boolean): Promise<boolean>
  /** Stop its background tasks, end its input, and let Claude Code exit (stopped after a grace). */
  end(): Promise<void>
}

/**
 * Start Claude Code for `input` in the SDK's streaming-input mode, its input open: the
 * model endpoint (the offline model with provider `stub`, the broker's gateway otherwise)
 * behind a {@link ModelGate} the agent shuts between tasks, Git credentials and skills set
 * up for as long as it lives. A failure to start is the first task's failure.
 *
 * @example
 * ```ts
 * const agent = await startAgent(input, { redactor })
 * await agent.run({ task_id: input.task_id, prompt: input.prompt, emit, steer }, false)
 * ```
 */
export async function startAgent(input: RunnerInput, opts: AgentOptions): Promise<Agent> {
  const { redactor } = opts
  const agent = opts.agentUser ?? null
  const stub = input.model.provider === 'stub'
  const gate = new ModelGate()
  const abortController = new AbortController()
  // Stops waiting for the SDK (after a grace): a cancel, or an interrupt it did not honour.
  const stop = new AbortController()
  const inbox = new Inbox()
  const watch = new TurnWatch()
  let current = null as TaskTurn | null
  let model: OfflineModelServer | undefined
  let modelFront: Awaited<ReturnType<typeof forwarder>> | undefined
  let git: GitCredentialSetup | undefined
  let broker: BrokerAccess | undefined
  let startFailure: string | undefined
  let messages: Query | undefined
  let drained: Promise<void> = Promise.resolve()
  let ended = false
  // Background task ends that came between tasks: the next task shows them first.
  const between: RunnerEvent[] = []
  const background = (event: RunnerEvent) => {
    // Before a task's result (its wind-down included), it is that task's.
    if (current) return current.emit(event)
    if (event.type === 'background_task' && event.status !== 'running') between.push(event)
    opts.idle?.(event)
  }
  const cleanup = async () => {
    git?.cleanup()
    await model?.close()
    await new Promise<void>((r) => (modelFront ? modelFront.close(() => r()) : r()))
    await broker?.close()
  }
  opts.signal?.addEventListener('abort', () => current?.cancel(), { once: true })
  try {
    if (stub) {
      model = await startOfflineModel({
        host: '127.0.0.1',
        port: 0,
        onRequest: () => mark('request'),
        onAnswer: (a) =>
          current?.addUsage(a.model, { ...a.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
      })
      const url = new URL(model.url)
      modelFront = await forwarder({ host: url.hostname, port: Number(url.port) }, gate)
    }
    mark('model')
    if (input.broker) broker = await openBroker(input.broker, gate)
    const skills = writeSkills(input.cwd, input.skills)
    for (const name of skills) giveToAgent(agent, join(input.cwd, '.claude', 'skills', name, 'SKILL.md'))
    if (input.git_credentials?.length)
      git = setupGitCredentials(input.git_credentials, { ...process.env, ...input.env }, undefined, agent)
    const options = sdkOptions(input, {
      stubUrl: modelFront && urlOf(modelFront),
      extraEnv: git?.env,
      broker,
      skills,
      abortController,
      stderr: opts.stderr ? (d) => opts.stderr!(redactor.text(d)) : undefined,
      agentUser: agent,
      // The task under way decides (the gate asks its steering, its transcript records what ran).
      canUseTool: input.require_approval?.length
        ? approvalGate(
            input,
            {
              decision: (id, signal) => current?.steer.decision(id, signal) ?? Promise.resolve(null),
            },
            (e) => current?.emit(e),
            () => current?.gateStop.signal ?? AbortSignal.abort(),
            (id, ran) => current?.transcript.ran(id, ran),
          )
        : undefined,
    })
    // Interrupts and a background task's stop concern only the turn and that task: what
    // else the agent left running stays up (a living session's dev server).
    ;(options as { perTaskStopAffordance?: boolean }).perTaskStopAffordance = true
    mark('spawn')
    messages = query({ prompt: inbox.messages(), options })
    const q = messages
    if (opts.onReady) {
      // Claude Code answered the SDK's initialize request, then built its system prompt and
      // tool list once (a context-usage summary: no model request) so the first prompt finds
      // them done (not awaited: a prompt may come sooner, and a start that fails shows in the run).
      void q
        .initializationResult()
        .then(() =>
          q.getContextUsage({ detail: 'summary' }).then(
            () => mark('primed'),
            () => {},
          ),
        )
        .then(
          () => {
            mark('ready')
            opts.onReady?.()
          },
          () => {},
        )
    }
    drained = (async () => {
      try {
        for await (const m of q) dispatch(m)
      } catch (err) {
        // Thrown after an error result, or when Claude Code is stopped: the task says what counts.
        current?.crashed(err instanceof Error ? err.message : String(err))
      } finally {
        ended = true
        current?.exited()
      }
    })()
  } catch (err) {
    startFailure = err instanceof Error ? err.message : String(err)
    ended = true
  }

  function dispatch(m: SDKMessage): void {
    if (m.type === 'system' && m.subtype === 'init') mark('init')
    if (m.type === 'system' && m.subtype === 'task_started' && m.is_backgrounded) {
      background({
        type: 'background_task',
        id: m.task_id,
        kind: m.task_type ?? 'task',
        description: m.description,
        status: 'running',
        summary: null,
        at: new Date().toISOString(),
      })
    } else if (m.type === 'system' && m.subtype === 'task_notification') {
      const known = watch.background().find((t) => t.task_id === m.task_id)
      background({
        type: 'background_task',
        id: m.task_id,
        kind: known?.task_type ?? 'task',
        description: known?.description ?? '',
        status: m.status,
        summary: m.summary,
        at: new Date().toISOString(),
      })
    }
    const end = watch.push(m)
    current?.message(m, end)
  }

  /** Stop the background tasks, end the input, wait for Claude Code to exit (stopped after a grace). */
  async function windDown(): Promise<void> {
    const exitGraceMs = opts.exitGraceMs ?? 5000
    const tasks = watch.background()
    if (messages && tasks.length && !ended) {
      const q = messages
      const stopped = Promise.allSettled(tasks.map((t) => q.stopTask(t.task_id)))
      await Promise.race([stopped, new Promise((r) => setTimeout(r, exitGraceMs).unref())])
    }
    inbox.end()
    const timer = setTimeout(() => {
      // Children first: Claude Code stopped by the abort would orphan its tools' processes.
      TaskTurn.killTools()
      abortController.abort()
      stop.abort()
    }, exitGraceMs)
    await drained.finally(() => clearTimeout(timer))
  }

  let ending: Promise<void> | null = null
  const endAgent = () => {
    ending ??= windDown().finally(cleanup)
    return ending
  }

  return {
    async run(task, stay) {
      // Earlier background ends first, then the prompt (the agent takes both up in this task).
      for (const e of between.splice(0)) task.emit(e)
      const turn = new TaskTurn(task, {
        input,
        redactor,
        stub,
        watch,
        inbox,
        abortController,
        stop,
        cancelled: () => opts.signal?.aborted === true,
        alive: () => !ended,
        interruptGraceMs: opts.interruptGraceMs,
        heldResultGraceMs: opts.heldResultGraceMs,
        cancelGraceMs: opts.cancelGraceMs,
      })
      const q = messages
      turn.onInterrupt = () => void q?.interrupt().catch(() => {})
      current = turn
      gate.open()
      const over = await turn.run(q ? undefined : (startFailure ?? 'the agent is not running'))
      const alive = stay && over.livedOn && !ended && !opts.signal?.aborted
      if (alive) gate.shut()
      else await endAgent()
      current = null
      mark('result')
      task.emit(turn.result())
      return alive
    },
    end: endAgent,
  }
}
