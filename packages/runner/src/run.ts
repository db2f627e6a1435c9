import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import { query, type Query } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { approvalGate } from './approvals.js'
import { openBroker, type BrokerAccess } from './broker.js'
import { giveToAgent, type AgentUser } from './agent-user.js'
import { setupGitCredentials, type GitCredentialSetup } from './git-credentials.js'
import { sdkOptions } from './options.js'
import type { Redactor } from './redact.js'
import { Meter } from './meter.js'
import { killToolProcesses } from './processes.js'
import { mark } from './probe.js'
import { Steering } from './steer.js'
import { Transcript } from './transcript.js'
import { TurnWatch, type TurnEnd } from './turn.js'
import { writeSkills } from './workspace.js'

/** What {@link runTask} needs besides the input. */
export interface RunTaskOptions {
  emit: (event: RunnerEvent) => void
  redactor: Redactor
  /** Aborting cancels the run; the result then says `cancelled`. */
  signal?: AbortSignal
  /** Claude Code's stderr, redacted (default: dropped). */
  stderr?: (text: string) => void
  /** How long to wait for the SDK to wind down after a cancel before giving up on it. */
  cancelGraceMs?: number
  /**
   * Warm mode: Claude Code is started now, with everything but the prompt, and waits in
   * the SDK's streaming-input mode; the run goes on when this settles with the task's
   * id and prompt (`input.prompt` and `input.task_id` are then ignored).
   */
  prompt?: Promise<TaskPrompt>
  /** Warm mode: Claude Code is up and waits for the prompt. */
  onReady?: () => void
  /** The control lines (decisions, interrupt, messages); none without it. */
  steer?: Steering
  /** How long an interrupted turn may take to wind down before Claude Code is stopped. */
  interruptGraceMs?: number
  /** Start Claude Code as this user, and hand it what the run writes for it (`agent-user.ts`). */
  agentUser?: AgentUser | null
  /**
   * How long the SDK's result may lag behind the agent's final message while background
   * work runs (Claude Code may hold it back until that work ends) before the run's result
   * is built from the transcript.
   */
  heldResultGraceMs?: number
  /** How long Claude Code may take to exit once the turn is over before it (and its tools) are stopped. */
  exitGraceMs?: number
}

/** What a warm runner learns only when its task arrives. */
export interface TaskPrompt {
  task_id: string
  prompt: string
}

/**
 * Run one prompt through the Claude Agent SDK and emit its transcript: `user_message`,
 * then turns, tokens, tool calls and results, and always exactly one `result` last.
 * The run is one task: the prompt and the agent's turns until it ends its turn
 * ({@link TurnWatch}); background work it started (a `run_in_background` server) does not
 * hold that end back, and is stopped with the run.
 * With provider `stub` the offline model is served on 127.0.0.1 for the run's duration.
 * The result's tokens and cost are this run's own model calls: every answer the offline
 * model gave (`stub`), or every answer streamed to the SDK (otherwise; where the model
 * gateway serves the run, the server takes the gateway's own count instead).
 *
 * @example
 * ```ts
 * await runTask(input, { emit: (e) => console.log(JSON.stringify(e)), redactor: createRedactor(input.redact) })
 * ```
 */
export async function runTask(input: RunnerInput, opts: RunTaskOptions): Promise<void> {
  const { redactor } = opts
  const agent = opts.agentUser ?? null
  const emit = (e: RunnerEvent) => {
    if (e.type === 'token') mark('token')
    opts.emit(e)
  }
  // Cold: the prompt is known now. Warm: user_message goes out once it arrives.
  const prompt: Promise<TaskPrompt> = opts.prompt ?? Promise.resolve({ task_id: input.task_id, prompt: input.prompt })
  let sentUser = false
  const sendUser = async () => {
    const p = await prompt
    if (!sentUser) emit({ type: 'user_message', text: p.prompt })
    sentUser = true
    return p
  }
  if (!opts.prompt) await sendUser()
  const stub = input.model.provider === 'stub'
  const meter = new Meter()
  // The offline model sees every call the run makes, a subagent's too; the SDK streams only the main agent's.
  const transcript = new Transcript(emit, redactor.stream(), stub ? undefined : (m, u) => meter.add(m, u))
  const steer = opts.steer ?? new Steering(() => {})
  const abortController = new AbortController()
  // Stops waiting for the SDK (after a grace): a cancel, or an interrupt it did not honour.
  const stop = new AbortController()
  const cancelled = () => opts.signal?.aborted === true
  // Ends every wait for a decision: a cancel, or an interrupt.
  const gateStop = new AbortController()
  const onAbort = () => {
    gateStop.abort()
    abortController.abort()
    stop.abort()
  }
  opts.signal?.addEventListener('abort', onAbort, { once: true })
  let interrupted = false
  /** What ended the agent's turn (null while it runs). */
  let turn: TurnEnd | null = null
  let interruptTimer: NodeJS.Timeout | undefined
  let model: OfflineModelServer | undefined
  let git: GitCredentialSetup | undefined
  let broker: BrokerAccess | undefined
  let failure: string | undefined
  try {
    if (stub)
      model = await startOfflineModel({
        host: '127.0.0.1',
        port: 0,
        onRequest: () => mark('request'),
        onAnswer: (a) => meter.add(a.model, { ...a.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
      })
    mark('model')
    if (input.broker) broker = await openBroker(input.broker)
    const skills = writeSkills(input.cwd, input.skills)
    for (const name of skills) giveToAgent(agent, join(input.cwd, '.claude', 'skills', name, 'SKILL.md'))
    if (input.git_credentials?.length)
      git = setupGitCredentials(input.git_credentials, { ...process.env, ...input.env }, undefined, agent)
    const options = sdkOptions(input, {
      stubUrl: model?.url,
      extraEnv: git?.env,
      broker,
      skills,
      abortController,
      stderr: opts.stderr ? (d) => opts.stderr!(redactor.text(d)) : undefined,
      agentUser: agent,
      canUseTool: input.require_approval?.length
        ? approvalGate(input, steer, emit, gateStop.signal, (id, ran) => transcript.ran(id, ran))
        : undefined,
    })
    if (cancelled()) throw new Error('cancelled')
    // Settles when the turn is over (or the run is stopped): no message goes to the agent after it.
    let settle!: () => void
    const over = new Promise<void>((r) => (settle = r))
    abortController.signal.addEventListener('abort', () => settle(), { once: true })
    // Settles once the background work is stopped (or the run is): the input ends then.
    let endInput!: () => void
    const inputDone = new Promise<void>((r) => (endInput = r))
    abortController.signal.addEventListener('abort', () => endInput(), { once: true })
    // Streaming input, cold and warm alike: the first user message is the prompt (warm: it
    // waits for it), then the messages of `message` control lines, which the SDK takes at
    // the next turn boundary. The input ends after the turn, so Claude Code exits as after
    // a one-shot prompt.
    const watch = new TurnWatch()
    const send = (text: string) => {
      const m = userMessage(text)
      watch.sent(m.uuid)
      return m
    }
    const streamed = async function* () {
      const p = await prompt
      yield send(p.prompt)
      for (let text = await steer.takeMessage(over); text !== null; text = await steer.takeMessage(over)) {
        emit({ type: 'user_message', text })
        yield send(text)
      }
      await inputDone
    }
    mark('spawn')
    const messages = query({ prompt: streamed(), options })
    steer.onInterrupt(() => {
      // Too late once the turn is over: the run finished as it was.
      if (interrupted || turn) return
      interrupted = true
      gateStop.abort()
      void messages.interrupt().catch(() => {})
      // A turn that does not wind down in time (a tool ignoring it) ends with Claude Code.
      interruptTimer = setTimeout(() => {
        // Children first: Claude Code stopped by the abort would orphan its tools' processes.
        killToolProcesses()
        abortController.abort()
        stop.abort()
      }, opts.interruptGraceMs ?? 1000)
    })
    if (opts.prompt) {
      // Claude Code answered the SDK's initialize request, then built its system prompt and
      // tool list once (a context-usage summary: no model request) so the first prompt finds
      // them done: the agent is up (not awaited: a prompt may come sooner, and a start that
      // fails shows in the run).
      void messages
        .initializationResult()
        .then(() =>
          messages.getContextUsage({ detail: 'summary' }).then(
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
      await sendUser()
      mark('prompt')
    }
    let drainEnded!: () => void
    const drained = new Promise<void>((r) => (drainEnded = r))
    let heldTimer: NodeJS.Timeout | undefined
    const endTurn = (end: TurnEnd) => {
      if (turn) return
      turn = end
      clearTimeout(heldTimer)
      settle()
      void windDown(messages, watch, {
        exitGraceMs: opts.exitGraceMs ?? 5000,
        endInput,
        abortController,
        stop,
        exited: drained,
      })
    }
    const drain = (async () => {
      // The SDK throws after it yielded an error result, or when Claude Code is stopped after
      // the turn; the turn is what counts then.
      try {
        for await (const m of messages) {
          if (m.type === 'system' && m.subtype === 'init') mark('init')
          const end = watch.push(m)
          // After the turn, only background tasks end: that belongs to no task. Nor does a
          // result that answers none of its messages.
          if (turn || (m.type === 'result' && end !== 'result')) continue
          transcript.push(m)
          if (end === 'result') endTurn(end)
          else if (end === 'final_message')
            heldTimer = setTimeout(
              () => watch.atFinalMessage && endTurn('final_message'),
              opts.heldResultGraceMs ?? 2000,
            )
        }
      } catch (err) {
        if (!turn || cancelled()) throw err
      } finally {
        clearTimeout(heldTimer)
        settle()
        drainEnded()
      }
    })()
    await untilAbortedPlusGrace(drain, stop.signal, () => (interrupted ? 300 : (opts.cancelGraceMs ?? 5000)))
  } catch (err) {
    failure = err instanceof Error ? err.message : String(err)
    // A warm start that failed still answers its task (once the prompt came) with this failure.
    await sendUser().catch(() => {})
  } finally {
    clearTimeout(interruptTimer)
    opts.signal?.removeEventListener('abort', onAbort)
    // The credentials live as long as the run: a warm session container keeps none between prompts.
    git?.cleanup()
    await model?.close()
    await broker?.close()
  }
  mark('result')
  emit(
    transcript.result(() => meter.usage(), cancelled() ? 'cancelled' : failure, {
      interrupted: interrupted && !cancelled(),
      heldResult: turn === 'final_message',
      ...(input.output_schema ? { schema: input.output_schema } : {}),
    }),
  )
}

/** A user message with a uuid of its own, which the SDK's result for it echoes. */
function userMessage(text: string) {
  return {
    type: 'user' as const,
    uuid: randomUUID(),
    message: { role: 'user' as const, content: text },
    parent_tool_use_id: null,
  }
}

/**
 * End a Claude Code process whose turn is over: its background tasks are stopped through
 * the SDK (no new turn comes of it, and Claude Code writes its session out), then its input
 * ends and it exits as after a one-shot prompt. One that is still there `exitGraceMs` later
 * is stopped with what its tools started (the run must end, and nothing hold its exec).
 */
async function windDown(
  q: Query,
  watch: TurnWatch,
  ctx: {
    exitGraceMs: number
    endInput: () => void
    abortController: AbortController
    stop: AbortController
    /** Settles when Claude Code's messages end (it exited). */
    exited: Promise<unknown>
  },
): Promise<void> {
  const tasks = watch.background()
  if (tasks.length) {
    const stopped = Promise.allSettled(tasks.map((t) => q.stopTask(t.task_id)))
    await Promise.race([stopped, new Promise((r) => setTimeout(r, ctx.exitGraceMs).unref())])
  }
  ctx.endInput()
  const timer = setTimeout(() => {
    // Children first: Claude Code stopped by the abort would orphan its tools' processes.
    killToolProcesses()
    ctx.abortController.abort()
    ctx.stop.abort()
  }, ctx.exitGraceMs)
  await ctx.exited.finally(() => clearTimeout(timer))
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
