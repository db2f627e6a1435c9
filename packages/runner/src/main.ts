#!/usr/bin/env node
/**
 * `berth-runner`: one RunnerInput JSON on stdin, RunnerEvent JSON lines on stdout (and
 * appended to `events_file`). Exit 0 once a result was written, whatever its outcome;
 * 2 for invalid input (after one `error` event); 1 on a crash. SIGTERM/SIGINT cancel the
 * run: the result then has outcome `error_during_execution` and error `cancelled`.
 * `BERTH_CONTAINER_ROOT` (set by the unsandboxed `local` runtime) puts the input's
 * container paths under that host directory.
 */
import { mkdirSync } from 'node:fs'
import { InputError, parseInput, readAll, underRoot } from './input.js'
import { openEventSink } from './event-sink.js'
import { createRedactor } from './redact.js'
import { runTask } from './run.js'

async function main(): Promise<number> {
  const cancel = new AbortController()
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => cancel.abort())

  let input
  try {
    input = underRoot(parseInput(await readAll(process.stdin)), process.env.BERTH_CONTAINER_ROOT)
  } catch (err) {
    if (!(err instanceof InputError)) throw err
    process.stdout.write(`${JSON.stringify({ type: 'error', message: err.message })}\n`)
    return 2
  }
  const gitTokens = (input.git_credentials ?? []).map((c) => c.token)
  const redactor = createRedactor([...input.redact, ...(input.model.api_key ? [input.model.api_key] : []), ...gitTokens])
  mkdirSync(input.cwd, { recursive: true })
  const sink = openEventSink(input.events_file, redactor)
  const debug = process.env.BERTH_RUNNER_DEBUG === '1'
  try {
    await runTask(input, {
      emit: (e) => sink.emit(e),
      redactor,
      signal: cancel.signal,
      stderr: debug ? (d) => process.stderr.write(d) : undefined,
    })
  } finally {
    await sink.close()
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
