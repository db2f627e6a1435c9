/**
 * `berth-runner`: one RunnerInput JSON line on stdin (or one JSON document ending at EOF,
 * as older servers send it), then RunnerControl lines (decisions, interrupt, messages)
 * until the result; RunnerEvent JSON lines on stdout (and appended to `events_file`). Exit 0 once a result was written, whatever its outcome;
 * 2 for invalid input (after one `error` event); 1 on a crash. SIGTERM/SIGINT cancel the
 * run: the result then has outcome `error_during_execution` and error `cancelled`.
 * `BERTH_CONTAINER_ROOT` (set by the unsandboxed `local` runtime) puts the input's
 * container paths under that host directory.
 *
 * `berth-runner --warm` (a warm agent): stdin is line by line. The first line,
 * `{"type":"init","input":RunnerInput}`, starts Claude Code at once (SDK streaming input);
 * the next, `{"type":"prompt","task_id","prompt","events_file","stay"?}`, hands it a task,
 * and from there it runs as above, control lines included. With `"stay":true` the agent
 * lives on after the task's result (a session's living agent: Claude Code, and what it left
 * running in the background, stay up) and takes the next prompt line; events that belong to
 * no task (a background task ending between two) go to stdout alone. Stdin ending exits 0
 * (before a prompt, without output), after the agent's background tasks are stopped and
 * Claude Code exited. Once Claude Code is up, it writes `{"warm":"ready"}` on stderr.
 */
mark('imports')
import { mark } from './probe.js'
import { mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { InputError, parseInput, underRoot } from './input.js'
import { agentUser, giveToAgent } from './agent-user.js'
import { startAgent, type Agent, type AgentOptions } from './agent.js'
import { openEventSink, type EventSink } from './event-sink.js'
import { createRedactor } from './redact.js'
import { Steering } from './steer.js'
import { lineReader, pumpControls, readFirstDocument, readWarmLines, WARM_READY, type WarmLines } from './warm.js'
import type { RunnerEvent, RunnerInput } from '@berth/contract'

async function main(): Promise<number> {
  const cancel = new AbortController()
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => cancel.abort())

  const root = process.env.BERTH_CONTAINER_ROOT
  const lines = lineReader(process.stdin)
  // The steering of the task under way: control lines go to it.
  let steer: Steering | null = null
  const warm: WarmLines | null = process.argv.includes('--warm')
    ? readWarmLines(lines, (line) => steer?.line(line))
    : null
  let input: RunnerInput
  try {
    input = underRoot(parseInput(warm ? await warm.init : await readFirstDocument(lines)), root)
  } catch (err) {
    if (!(err instanceof InputError)) throw err
    // Evicted before any task (stdin closed): nothing to say.
    if (err.message.startsWith('stdin ended')) return 0
    return invalid(err.message)
  }
  const gitTokens = (input.git_credentials ?? []).map((c) => c.token)
  const redactor = createRedactor([
    ...input.redact,
    ...(input.model.api_key ? [input.model.api_key] : []),
    ...(input.broker ? [input.broker.token] : []),
    ...gitTokens,
  ])
  mark('input')
  mkdirSync(input.cwd, { recursive: true })
  // Root in an engine container: the agent runs as the workspace's owner, apart from the runner.
  const agentAs = agentUser(input.cwd)
  giveToAgent(agentAs, input.cwd)
  // The events directory stays the runner's; the rest of `.berth` (Claude Code's config) is the agent's.
  const openSink = (file: string) => {
    const opened = openEventSink(file, redactor)
    giveToAgent(agentAs, dirname(dirname(file)))
    return opened
  }
  const debug = process.env.BERTH_RUNNER_DEBUG === '1'
  const options: AgentOptions = {
    redactor,
    agentUser: agentAs,
    signal: cancel.signal,
    // Tests shorten it to exercise an interrupt Claude Code does not honour in time.
    interruptGraceMs: Number(process.env.BERTH_RUNNER_INTERRUPT_GRACE_MS) || undefined,
    stderr: debug ? (d) => process.stderr.write(d) : undefined,
  }
  /** One task on `agent`: its events to its file and stdout, its control lines to its steering. */
  const serve = async (agent: Agent, task: { task_id: string; prompt: string; events_file: string }, stay: boolean) => {
    const sink: EventSink = openSink(task.events_file)
    let done = false
    const emit = (e: RunnerEvent) => {
      if (e.type === 'result') done = true
      sink.emit(e)
    }
    // Control lines count until the result is out.
    steer = new Steering((message) => {
      if (!done) emit({ type: 'error', message })
    })
    try {
      return await agent.run({ task_id: task.task_id, prompt: task.prompt, emit, steer }, stay)
    } finally {
      steer = null
      await sink.close()
    }
  }
  if (!warm) {
    const agent = await startAgent(input, options)
    const served = serve(agent, input, false)
    void pumpControls(lines, { line: (l: string) => steer?.line(l) } as Steering)
    await served
    return 0
  }
  // Events of no task (a background task's end between two tasks) go to stdout alone.
  const idle = openEventSink(null, redactor)
  const agent = await startAgent(input, {
    ...options,
    budgetPerTask: true,
    idle: (e) => idle.emit(e),
    onReady: () => process.stderr.write(`${WARM_READY}\n`),
  })
  const cancelled = new Promise<null>((r) => cancel.signal.addEventListener('abort', () => r(null), { once: true }))
  const cwd = input.cwd
  for (;;) {
    let prompt: Awaited<ReturnType<WarmLines['next']>>
    try {
      prompt = await Promise.race([warm.next(), cancelled])
    } catch (err) {
      await agent.end()
      return invalid(err instanceof Error ? err.message : String(err))
    }
    if (!prompt) break
    const file = root ? join(root, prompt.events_file) : resolve(cwd, prompt.events_file)
    if (!(await serve(agent, { ...prompt, events_file: file }, prompt.stay))) break
  }
  await agent.end()
  await idle.close()
  return 0
}

/** Input that is not a RunnerInput: one `error` event, exit 2. */
function invalid(message: string): number {
  process.stdout.write(`${JSON.stringify({ type: 'error', message })}\n`)
  return 2
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`berth-runner crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    process.exit(1)
  },
)
