/**
 * A task whose agent starts a server with Claude Code's own `run_in_background: true` Bash,
 * reaches it with a foreground probe in the same turn, then ends its turn: the task must
 * end `completed` with that turn (issue 42), not wait for the server.
 */
import type { BerthClient, SubmitTaskInput, Task } from '@berth/client'
import type { ContainerRuntime } from '@berth/core'
import { expect, vi } from 'vitest'
import { waitForTask } from './helpers.js'
import { onEngine } from './pool.helpers.js'

/** What the background server answers, assembled at run time so that no command text holds it. */
export const SERVED = 'bg-served'

/** The final text of the turn. */
export const FINAL_TEXT = 'The server runs in the background.'

/** Long enough that a task held open by its background work fails TIME_LIMIT_EXCEEDED, not a wait here. */
export const MAX_DURATION_S = 120

/** The prompt: a background server on `port`, a foreground probe of it (retrying while it starts), the final text. */
export function backgroundServerPrompt(port: number): string {
  const server = `node -e "require('http').createServer((q,r)=>r.end('bg-'+'served')).listen(${port})"`
  const probe =
    `node -e "const go=n=>require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout))` +
    `.on('error',e=>n?setTimeout(go,200,n-1):(console.error(e.message),process.exit(1)));go(150)"`
  return (
    `Start the server, then check it. [[berth:tool Bash ${JSON.stringify({ command: server, run_in_background: true })}]] ` +
    `[[berth:tool Bash ${JSON.stringify({ command: probe })}]] [[berth:text ${FINAL_TEXT}]]`
  )
}

/** A port for the server: each container (and each bubblewrap sandbox) has its own network. */
export const serverPort = () => 20_000 + Math.floor(Math.random() * 20_000)

/**
 * Submit `body` with a background server prompt and wait for the task's end, for longer
 * than its own `max_duration_s` (so a task the server holds open ends by its limit).
 */
export async function runBackgroundServer(
  api: BerthClient,
  submit: (body: Partial<SubmitTaskInput> & { prompt: string }) => Promise<{ task_id: string }>,
  body: Partial<SubmitTaskInput> = {},
): Promise<Task> {
  const sub = await submit({ prompt: backgroundServerPrompt(serverPort()), max_duration_s: MAX_DURATION_S, ...body })
  return waitForTask(api, sub.task_id, { timeout: (MAX_DURATION_S + 90) * 1000, interval: 250 })
}

/** The task ended `completed` with its turn: the final text, both calls, and the probe reached the server. */
export async function expectEndedWithTurn(api: BerthClient, task: Task): Promise<void> {
  expect(task.error, JSON.stringify(task.error)).toBeNull()
  expect(task.status).toBe('completed')
  expect(task.result!.text).toContain(FINAL_TEXT)
  expect(task.result!.turns).toBe(3)
  expect(task.result!.tool_calls.map((c) => c.name)).toEqual(['Bash', 'Bash'])
  expect(task.result!.input_tokens).toBeGreaterThan(0)
  expect(task.result!.cost_usd).toBeGreaterThan(0)
  const events = (await api.tasks.events({ params: { id: task.task_id }, query: { limit: 100 } })).events
  const outputs = events.flatMap((e) => (e.type === 'tool_result' ? [e.output] : []))
  expect(outputs).toHaveLength(2)
  expect(outputs[1]).toBe(SERVED)
  expect(events.at(-1)?.type).toBe('result')
}

/** What {@link sessionAndBatchEndWithTurn} needs: a caller on a server, its runtime and pool. */
export interface BackgroundCase {
  api: BerthClient
  submit: (body: Partial<SubmitTaskInput> & { prompt: string }) => Promise<{ task_id: string }>
  runtime: ContainerRuntime
  pool: string
}

/**
 * A session task and a batch task whose agent starts a background server both end
 * `completed` with their turn. The session goes on: its next follow-up runs, and finds the
 * server stopped with the task that started it (each task is its own runner for now). The
 * batch task's container, and the server in it, is reaped.
 */
export async function sessionAndBatchEndWithTurn(t: BackgroundCase): Promise<void> {
  const port = serverPort()
  const session = await runBackgroundServer(t.api, t.submit, { mode: 'session', prompt: backgroundServerPrompt(port) })
  await expectEndedWithTurn(t.api, session)
  const check = `node -e "require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout)).on('error',e=>console.log('stopped:'+e.code))"`
  const next = await t.submit({
    mode: 'session',
    session_id: session.session_id!,
    prompt: `Is it still up? [[berth:tool Bash ${JSON.stringify({ command: check })}]] [[berth:text Checked.]]`,
  })
  const followUp = await waitForTask(t.api, next.task_id, { timeout: 120_000, interval: 250 })
  expect(followUp.status).toBe('completed')
  expect(followUp.workspace_id).toBe(session.workspace_id)
  const events = (await t.api.tasks.events({ params: { id: next.task_id }, query: { limit: 100 } })).events
  expect(
    events.find((e) => e.type === 'tool_result'),
    JSON.stringify(events),
  ).toMatchObject({
    output: 'stopped:ECONNREFUSED',
  })

  const batch = await runBackgroundServer(t.api, t.submit)
  await expectEndedWithTurn(t.api, batch)
  await vi.waitFor(async () => {
    const claimed = (await onEngine(t.runtime, t.pool)).filter(
      (c) => c.labels['berth.workspace'] === batch.workspace_id,
    )
    expect(claimed).toEqual([])
  }, 30_000)
}
