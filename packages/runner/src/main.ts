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
 * the second, `{"type":"prompt","task_id","prompt","events_file"}`, hands it the task, and
 * from there it runs as above, control lines included. Stdin ending before a prompt exits 0 without output. Once
 * Claude Code is up, it writes `{"warm":"ready"}` on stderr.
 */
mark('imports')
import { mark } from './probe.js'
import { mkdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { InputError, parseInput, underRoot } from './input.js'
import { agentUser, giveToAgent } from './agent-user.js'
import { openEventSink, type EventSink } from './event-sink.js'
import { createRedactor } from './redact.js'
import { runTask } from './run.js'
import { Steering } from './steer.js'
import { lineReader, pumpControls, readFirstDocument, readWarmLines, WARM_READY, type WarmLines } from './warm.js'
import type { RunnerEvent, RunnerInput } from '@berth/contract'

async function main(): Promise<number> {
  const cancel = new AbortController()
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => cancel.abort())

  const root = process.env.BERTH_CONTAINER_ROOT
  const lines = lineReader(process.stdin)
  const warm: WarmLines | null = process.argv.includes('--warm') ? readWarmLines(lines) : null
  let input: RunnerInput
  try {
    input = underRoot(parseInput(warm ? await warm.init : await readFirstDocument(lines)), root)
  } catch (err) {
    if (!(err instanceof InputError)) throw err
    process.stdout.write(`${JSON.stringify({ type: 'error', message: err.message })}\n`)
    return 2
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
  const agent = agentUser(input.cwd)
  giveToAgent(agent, input.cwd)
  // The events directory stays the runner's; the rest of `.berth` (Claude Code's config) is the agent's.
  const openSink = (file: string) => {
    const opened = openEventSink(file, redactor)
    giveToAgent(agent, dirname(dirname(file)))
    return opened
  }
  const debug = process.env.BERTH_RUNNER_DEBUG === '1'
  let sink: EventSink | null = null
  const early: RunnerEvent[] = []
  let prompt: WarmLines['prompt'] | undefined
  if (warm) {
    const cwd = input.cwd
    prompt = warm.prompt.then(
      (p) => {
        const file = root ? join(root, p.events_file) : resolve(cwd, p.events_file)
        sink = openSink(file)
        for (const e of early.splice(0)) sink.emit(e)
        return p
      },
      (err: unknown) => {
        // Evicted before any task (stdin closed): nothing to say.
        if (err instanceof InputError && err.message.startsWith('stdin ended')) process.exit(0)
        process.stdout.write(
          `${JSON.stringify({ type: 'error', message: err instanceof Error ? err.message : String(err) })}\n`,
        )
        process.exit(2)
      },
    )
  } else sink = openSink(input.events_file)
  const emit = (e: RunnerEvent) => (sink ? sink.emit(e) : early.push(e))
  let done = false
  // Control lines come after the input (warm: after the prompt); none count once the result is out.
  const steer = new Steering((message) => {
    if (!done) emit({ type: 'error', message })
  })
  void (prompt ?? Promise.resolve()).then(() => pumpControls(lines, steer))
  try {
    await runTask(input, {
      emit: (e) => {
        if (e.type === 'result') done = true
        emit(e)
      },
      steer,
      // Tests shorten it to exercise an interrupt Claude Code does not honour in time.
      interruptGraceMs: Number(process.env.BERTH_RUNNER_INTERRUPT_GRACE_MS) || undefined,
      ...(prompt && { prompt, onReady: () => process.stderr.write(`${WARM_READY}\n`) }),
      redactor,
      agentUser: agent,
      signal: cancel.signal,
      stderr: debug ? (d) => process.stderr.write(d) : undefined,
    })
  } finally {
    await (sink as EventSink | null)?.close()
  }
  return 0
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`berth-runner crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    process.exit(1)
  },
)
