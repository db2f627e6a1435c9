import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
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
  /**
   * The task's `max_budget_usd`, held here against the task's own model calls when Claude
   * Code serves several tasks (its own `maxBudgetUsd` counts every call since it started).
   */
  budgetUsd?: number | null | undefined
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
  /** The task's own calls reached its budget: the turn was stopped there (see {@link TurnDeps.budgetUsd}). */
  private overBudget = false
  /** The stop reason of the main agent's model call under way. */
  private stopReason: string | null = null
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
      d.stub ? undefined : (m, u) => this.meter.add(m, u),
    )
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
    steer.onInterrupt(() => this.interrupt())
    await untilAbortedPlusGrace(this.done, this.d.stop.signal, () =>
      this.interrupted ? 300 : (this.d.cancelGraceMs ?? 5000),
    )
    clearTimeout(this.heldTimer)
    clearTimeout(this.interruptTimer)
    this.open = false
    return { livedOn: !this.d.stop.signal.aborted && this.d.alive() && this.end !== null }
  }

  /** Set by the agent: interrupt Claude Code's current turn. */
  onInterrupt?: () => void

  /** Stop the turn (a caller's interrupt, or the task's budget spent). */
  private interrupt(): void {
    // Too late once the turn is over: the task finished as it was.
    if (this.interrupted || this.end) return
    this.interrupted = true
    this.gateStop.abort()
    this.onInterrupt?.()
    // A turn that does not wind down in time (a tool ignoring it) ends with Claude Code.
    this.interruptTimer = setTimeout(() => this.kill(), this.d.interruptGraceMs ?? 1000)
  }

  /**
   * At the end of each of the main agent's model calls: once the task's own calls cost its
   * budget, a call that asked for tools is the last (the turn is stopped, as Claude Code's
   * `maxBudgetUsd` would stop it); one that ended the turn ends it anyway.
   */
  private holdBudget(m: SDKMessage): void {
    const budget = this.d.budgetUsd
    if (budget === null || budget === undefined || m.type !== 'stream_event' || m.parent_tool_use_id) return
    const e = m.event as { type: string; delta?: { stop_reason?: string | null } }
    if (e.type === 'message_start') this.stopReason = null
    else if (e.type === 'message_delta' && e.delta?.stop_reason) this.stopReason = e.delta.stop_reason
    else if (e.type === 'message_stop' && this.meter.usage().cost_usd >= budget) {
      this.overBudget = true
      if (this.stopReason === 'tool_use') this.interrupt()
    }
  }

  /** One SDK message while this task is the agent's, with what the watch made of it. */
  message(m: SDKMessage, end: TurnEnd | null): void {
    // After the turn, only background tasks end: that belongs to no task. Nor does a result
    // that answers none of its messages.
    if (!this.open || this.end || (m.type === 'result' && end !== 'result')) return
    this.transcript.push(m)
    this.holdBudget(m)
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
    const r = this.transcript.result(() => this.meter.usage(), cancelled ? 'cancelled' : this.failure, {
      interrupted: this.interrupted && !cancelled,
      heldResult: this.end === 'final_message',
      ...(this.d.input.output_schema ? { schema: this.d.input.output_schema } : {}),
    })
    // Claude Code's own words for it (its budget was not given to it: see TurnDeps.budgetUsd).
    if (this.overBudget && (r.outcome === 'success' || r.outcome === 'interrupted'))
      return { ...r, outcome: 'error_max_budget_usd', error: `Reached maximum budget ($${this.d.budgetUsd})` }
    return r
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
