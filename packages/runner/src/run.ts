import type { RunnerInput } from '@berth/contract'
import { startAgent, type AgentOptions } from './agent.js'
import type { Steering } from './steer.js'
import type { RunnerEvent } from '@berth/contract'

/** What {@link runTask} needs besides the input. */
export interface RunTaskOptions extends AgentOptions {
  emit: (event: RunnerEvent) => void
  steer: Steering
}

/**
 * Run one prompt (`input.prompt`) through the Claude Agent SDK and emit its transcript:
 * `user_message`, then turns, tokens, tool calls and results, and always exactly one
 * `result` last. The run is one task: the prompt and the agent's turns until it ends its
 * turn; background work it started (a `run_in_background` server) does not hold that end
 * back, and is stopped (Claude Code exits) before the result goes out. With provider
 * `stub` the offline model is served on 127.0.0.1 for the run's duration. The result's
 * tokens and cost are this run's own model calls.
 *
 * @example
 * ```ts
 * await runTask(input, { emit: (e) => console.log(JSON.stringify(e)), steer, redactor: createRedactor(input.redact) })
 * ```
 */
export async function runTask(input: RunnerInput, opts: RunTaskOptions): Promise<void> {
  const agent = await startAgent(input, opts)
  await agent.run({ task_id: input.task_id, prompt: input.prompt, emit: opts.emit, steer: opts.steer }, false)
}
