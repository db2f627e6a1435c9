import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent, RunnerInput, TokenUsage } from '@berth/contract'
import type { Inbox } from './inbox.js'
import { Meter } from './meter.js'
import { killToolProcesses } from './processes.js'
import { mark } from './probe.js'
import type { Redactor } from './redact.js'
import type { Steering } from './steer.js'
import { Transcript } from './transcript.js'
import type { TurnEnd, TurnWatch } from './turn.js'

type ResultEvent = Extract<RunnerEvent, { type: 'result' }>

/** One task an agent serves: its prompt, where its events go, and its control lines. */
export interface TaskRun {
  task_id: string
  prompt: string
  emit: (event: RunnerEvent) => void
  steer: Steering
}

/** What a task's turn shares with its agent (one Claude Code process). */
export interface TurnDeps {
  input: RunnerInput
  redactor: Redactor
  stub: boolean
  watch: TurnWatch
  inbox: Inbox
  /** Aborting stops Claude Code (the agent ends). */
  abortController: AbortController
  /** Aborts when the agent is being stopped: the turn is waited for a grace more, then given up. */
  stop: AbortController
  cancelled: () => boolean
  /** Whether Claude Code still runs. */
  alive: () => boolean
  interruptGraceMs?: number | undefined
  heldResultGraceMs?: number | undefined
  cancelGraceMs?: number | undefined
}

/**
 * One task's part of an agent's message stream: its user messages (the prompt, then the
 * `message` control lines), the agent's turns until it ends its turn ({@link TurnWatch}),
 * its transcript events and its own model calls ({@link Meter}), and its one result.
 * Interrupts and decisions come through its steering.
 *
 * @example
 * ```ts
 * const turn = new TaskTurn(task, deps)
 * await turn.run()
 * task.emit(turn.result())
 * ```
 */
export class TaskTurn {
  readonly meter = new Meter()
  readonly transcript: Transcript
  /** Ends every wait for a decision: a cancel, or an interrupt. */
  readonly gateStop = new AbortController()
  /** Until the turn is over: the agent's messages are this task's. */
  open = true
  private end: TurnEnd | null = null
  private failure: string | undefined
  private interrupted = false
  private overBudget = false
  private heldTimer: NodeJS.Timeout | undefined
  private interruptTimer: NodeJS.Timeout | undefined
  private settle!: () => void
  private readonly done = new Promise<void>((r) => (this.settle = r))

  constructor(
    private readonly task: TaskRun,
    private readonly d: TurnDeps,
  ) {
    // The offline model sees every call the run makes, a subagent's too; the SDK streams only the main agent's.
    this.transcript = new Transcript(
      (e) => this.emit(e),
      d.redactor.stream(),
      d.stub ? undefined : (m, u) => this.addUsage(m, u),
    )
  }

  /**
   * One of the task's model calls answered: metered, and held to the task's `max_budget_usd`
   * (its own calls only: a living agent's earlier tasks do not count). Past it, the turn is
   * stopped as an interrupt stops it, and the result says `error_max_budget_usd`.
   */
  addUsage(model: string, usage: TokenUsage): void {
    this.meter.add(model, usage)
  }

  /** After each of the agent's messages: past `max_budget_usd`, stop the turn (see {@link addUsage}). */
  private checkBudget(): void {
    const budget = this.d.input.max_budget_usd
    if (budget === null || this.overBudget || this.end || this.meter.usage().cost_usd < budget) return
    this.overBudget = true
    this.gateStop.abort()
    this.onInterrupt?.()
    this.interruptTimer ??= setTimeout(() => this.kill(), this.d.interruptGraceMs ?? 1000)
  }

  get steer(): Steering {
    return this.task.steer
  }

  emit(e: RunnerEvent): void {
    if (e.type === 'token') mark('token')
    this.task.emit(e)
  }

  /**
   * Send the prompt and wait until the turn is over (or the agent is stopped, after a
   * grace). `failure`: the agent could not start; the task ends with it. Says whether the
   * agent lived through the turn.
   */
  async run(failure?: string): Promise<{ livedOn: boolean }> {
    const { watch, inbox, steer } = { ...this.d, steer: this.task.steer }
    this.emit({ type: 'user_message', text: this.task.prompt })
    if (failure || this.d.cancelled() || !this.d.alive()) {
      this.failure = this.d.cancelled() ? 'cancelled' : (failure ?? 'the agent is not running')
      this.open = false
      return { livedOn: false }
    }
    watch.beginTask()
    watch.sent(inbox.send(this.task.prompt))
    mark('prompt')
    // Messages from `message` control lines, which the SDK takes at the next turn boundary.
    void (async () => {
      for (let text = await steer.takeMessage(this.done); text !== null; text = await steer.takeMessage(this.done)) {
        this.emit({ type: 'user_message', text })
        watch.sent(inbox.send(text))
      }
    })()
    steer.onInterrupt(() => {
      // Too late once the turn is over: the task finished as it was.
      if (this.interrupted || this.overBudget || this.end) return
      this.interrupted = true
      this.gateStop.abort()
      this.onInterrupt?.()
      // A turn that does not wind down in time (a tool ignoring it) ends with Claude Code.
      this.interruptTimer = setTimeout(() => this.kill(), this.d.interruptGraceMs ?? 1000)
    })
    await untilAbortedPlusGrace(this.done, this.d.stop.signal, () =>
      this.interrupted || this.overBudget ? 300 : (this.d.cancelGraceMs ?? 5000),
    )
    clearTimeout(this.heldTimer)
    clearTimeout(this.interruptTimer)
    this.open = false
    return { livedOn: !this.d.stop.signal.aborted && this.d.alive() && this.end !== null }
  }

  /** Set by the agent: interrupt Claude Code's current turn. */
  onInterrupt?: () => void

  /** One SDK message while this task is the agent's, with what the watch made of it. */
  message(m: SDKMessage, end: TurnEnd | null): void {
    // After the turn, only background tasks end: that belongs to no task. Nor does a result
    // that answers none of its messages.
    if (!this.open || this.end || (m.type === 'result' && end !== 'result')) return
    this.transcript.push(m)
    this.checkBudget()
    if (end === 'result') this.endTurn('result')
    else if (end === 'final_message') {
      clearTimeout(this.heldTimer)
      this.heldTimer = setTimeout(
        () => this.d.watch.atFinalMessage && this.endTurn('final_message'),
        this.d.heldResultGraceMs ?? 2000,
      )
    }
  }

  /** The task was cancelled: Claude Code is stopped (the agent ends with it). */
  cancel(): void {
    this.gateStop.abort()
    this.d.abortController.abort()
    this.d.stop.abort()
  }

  /** The SDK's stream threw: a failure unless the turn was already over. */
  crashed(message: string): void {
    if (!this.end || this.d.cancelled()) this.failure ??= message
  }

  /** Claude Code's messages ended (it exited). */
  exited(): void {
    this.settle()
  }

  /** The task's one result, from its transcript and its own model calls. */
  result(): ResultEvent {
    const cancelled = this.d.cancelled()
    return this.transcript.result(() => this.meter.usage(), cancelled ? 'cancelled' : this.failure, {
      interrupted: this.interrupted && !cancelled,
      ...(this.overBudget && !cancelled && { overBudget: this.d.input.max_budget_usd ?? 0 }),
      heldResult: this.end === 'final_message',
      ...(this.d.input.output_schema ? { schema: this.d.input.output_schema } : {}),
    })
  }

  /** Stop Claude Code and what its tools started (children first: the abort would orphan them). */
  static killTools(): void {
    killToolProcesses()
  }

  private kill(): void {
    killToolProcesses()
    this.d.abortController.abort()
    this.d.stop.abort()
  }

  private endTurn(end: TurnEnd): void {
    if (this.end) return
    this.end = end
    clearTimeout(this.heldTimer)
    this.settle()
  }
}

/** `work`, but settles at most `graceMs()` after `signal` aborts (a stuck SDK must not keep us). */
function untilAbortedPlusGrace(work: Promise<void>, signal: AbortSignal, graceMs: () => number): Promise<void> {
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    const onAbort = () => {
      timer = setTimeout(() => resolve(), graceMs())
    }
    if (signal.aborted) onAbort()
    else signal.addEventListener('abort', onAbort, { once: true })
    work.then(resolve, reject).finally(() => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
    })
  })
}
