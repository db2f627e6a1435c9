/**
 * A task's time to first token cut into steps, from the caller's two times (submit frame
 * sent, first `token` event received) and the spans the server exported for the task's
 * trace. Each step ends where the next begins, so the steps add up to the whole.
 */
import type { ReceivedSpan } from './otlp-spans.js'

/**
 * The steps, in order, with what bounds each one. The runner echoes the prompt as its
 * first event (`user_message`) when it takes it; the offline model runs inside the runner
 * (no gateway call to time), so `agent to model` ends when the model's answer begins to
 * arrive at Berth (the runner relays its `message_start` as `turn_start`).
 */
export const STEPS = [
  ['berth in', 'submit frame sent → task stored and queued (task.submit ends)'],
  ['queue', 'queued → the run claims a container (task.claim starts)'],
  ['claim', 'task.claim: a warm container (or agent) leased'],
  ['hand-off', 'claimed → the runner took the prompt (its first event reaches Berth: runner.first_event)'],
  ['agent to model', "prompt taken → the model's answer begins at Berth (runner.first_turn)"],
  ['model to token', 'answer begins → its first text reaches Berth (runner.first_token)'],
  ['token to caller', 'first text at Berth → first token event at the caller'],
] as const

export type StepName = (typeof STEPS)[number][0]

/** The steps of one task (ms), whether a warm agent took it and whether that agent was up, or the name of the span that is missing. */
export function stepsOf(
  taskId: string,
  sent: number,
  token: number,
  traces: Map<string, ReceivedSpan[]>,
): { steps: Record<StepName, number>; warmAgent: boolean; agentUp: boolean } | string {
  let spans: ReceivedSpan[] | undefined
  for (const list of traces.values())
    if (list.some((s) => s.name === 'task.queue' && s.attributes['berth.task.id'] === taskId)) {
      spans = list
      break
    }
  if (!spans) return 'task.queue'
  const first = (match: (s: ReceivedSpan) => boolean) =>
    spans
      .filter(match)
      .sort((a, b) => a.start - b.start)
      .at(0)
  const submit = first((s) => s.name === 'task.submit')
  const claim = first((s) => s.name === 'task.claim')
  const runner = first((s) => s.name === 'task.runner')
  const firstEvent = runner?.events.find((e) => e.name === 'runner.first_event')?.at
  const firstTurn = runner?.events.find((e) => e.name === 'runner.first_turn')?.at
  const firstToken = runner?.events.find((e) => e.name === 'runner.first_token')?.at
  if (!submit) return 'task.submit'
  if (!claim) return 'task.claim'
  if (!runner) return 'task.runner'
  if (firstEvent === undefined) return 'runner.first_event'
  if (firstTurn === undefined) return 'runner.first_turn'
  if (firstToken === undefined) return 'runner.first_token'
  const steps = {
    'berth in': submit.end - sent,
    queue: claim.start - submit.end,
    claim: claim.end - claim.start,
    'hand-off': firstEvent - claim.end,
    'agent to model': firstTurn - firstEvent,
    'model to token': firstToken - firstTurn,
    'token to caller': token - firstToken,
  }
  return {
    steps,
    warmAgent: runner.attributes['berth.runner.warm'] === true,
    agentUp: runner.attributes['berth.runner.ready'] === true,
  }
}
