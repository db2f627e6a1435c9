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
 * A Bash command printing the Claude Code process it runs under: its pid and its start time
 * (`agent-pid:N@T`, T in clock ticks since boot). Each runner on `local` has a pid namespace
 * of its own, where Claude Code gets the same pid every time: the start time tells them apart.
 */
export const AGENT_PID =
  `node -e "const fs=require('fs');const stat=p=>fs.readFileSync('/proc/'+p+'/stat','utf8').split(') ')[1].split(' ');let p=process.ppid;for(;p>1;){const a=fs.readFileSync('/proc/'+p+'/cmdline','utf8').split(String.fromCharCode(0))[0];` +
  `if(/(^|\\/)claude$/.test(a))break;p=+stat(p)[1]}console.log('agent-pid:'+p+'@'+stat(p)[19])"`

/** A Bash command that GETs the server on `port`: its answer, or `stopped:<code>`. */
export const getServer = (port: number) =>
  `node -e "require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout)).on('error',e=>console.log('stopped:'+e.code))"`

/** A `[[berth:tool Bash …]]` directive running `command` (in the background: with `run_in_background`). */
export const bash = (command: string, background = false) =>
  `[[berth:tool Bash ${JSON.stringify(background ? { command, run_in_background: true } : { command })}]]`

/** The outputs of a task's tool calls, in order. */
export async function toolOutputs(api: BerthClient, taskId: string): Promise<string[]> {
  const events = (await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })).events
  return events.flatMap((e) => (e.type === 'tool_result' ? [String(e.output).trim()] : []))
}

/**
 * A session's agent lives between follow-ups (issue 42). Its first task starts a server and
 * a short build with `run_in_background` and ends `completed` with its turn; between the
 * tasks the server runs on (the workspace shows it; previews.test.ts serves one) and the build ends;
 * the follow-up runs in the same Claude Code process, reaches the server, and its agent
 * knows the build's end (shown first in its transcript). `stop` ends the agent and its
 * server; the next follow-up resumes the conversation in a new one. A batch task's
 * background server goes with its container.
 */
export async function sessionAndBatchEndWithTurn(t: BackgroundCase): Promise<void> {
  const port = serverPort()
  const server = `node -e "require('http').createServer((q,r)=>r.end('bg-'+'served')).listen(${port})"`
  const first = await runBackgroundServer(t.api, t.submit, {
    mode: 'session',
    prompt: `Start the server and the build. ${bash(server, true)} ${bash('sleep 3; echo build-' + 'done', true)} ${bash(AGENT_PID)} [[berth:text Serving.]]`,
  })
  expect(first.error, JSON.stringify(first.error)).toBeNull()
  expect(first.status).toBe('completed')
  expect(first.result!.text).toContain('Serving.')
  const [pid1] = (await toolOutputs(t.api, first.task_id)).filter((o) => o.startsWith('agent-pid:'))
  expect(pid1).toMatch(/^agent-pid:\d+@\d+$/)
  const wsId = first.workspace_id!
  // Between the tasks: the agent lives, its server runs and the build ended.
  const between = await vi.waitFor(
    async () => {
      const ws = await t.api.workspaces.get({ params: { id: wsId } })
      expect(ws.agent?.background.map((b) => b.description)).toEqual([expect.stringContaining(`listen(${port})`)])
      return ws
    },
    { timeout: 60_000, interval: 250 },
  )
  expect(between).toMatchObject({ status: 'running', agent: { tasks: 1 } })

  const second = await t.submit({
    mode: 'session',
    session_id: first.session_id!,
    prompt: `Is it up? ${bash(getServer(port))} ${bash(AGENT_PID)} [[berth:text Checked.]] [[berth:notifications]]`,
  })
  const followUp = await waitForTask(t.api, second.task_id, { timeout: 120_000, interval: 250 })
  expect(followUp.status, JSON.stringify(followUp.error)).toBe('completed')
  const outputs = await toolOutputs(t.api, second.task_id)
  expect(outputs).toContain(SERVED)
  // The same Claude Code process: no agent started for the follow-up.
  expect(outputs.filter((o) => o.startsWith('agent-pid:'))).toEqual([pid1])
  // The build's end came between the tasks: first in the follow-up's transcript, and known to its agent.
  const events = (await t.api.tasks.events({ params: { id: second.task_id }, query: { limit: 100 } })).events
  expect(events[0]).toMatchObject({ type: 'background_task', status: 'completed', kind: 'local_bash' })
  expect(events.findIndex((e) => e.type === 'user_message')).toBeGreaterThan(0)
  expect(followUp.result!.text).toContain('build-done')
  expect((await t.api.workspaces.get({ params: { id: wsId } })).agent).toMatchObject({ tasks: 2 })

  // Stopped: the agent and its server are gone; the next follow-up resumes the conversation.
  const stopped = await t.api.workspaces.stop({ params: { id: wsId } })
  expect(stopped).toMatchObject({ status: 'idle', container_id: null, agent: null })
  const third = await t.submit({
    mode: 'session',
    session_id: first.session_id!,
    prompt: `And now? ${bash(getServer(port))} [[berth:recall_all]]`,
  })
  const resumed = await waitForTask(t.api, third.task_id, { timeout: 120_000, interval: 250 })
  expect(resumed.status, JSON.stringify(resumed.error)).toBe('completed')
  expect(await toolOutputs(t.api, third.task_id)).toEqual(['stopped:ECONNREFUSED'])
  expect(resumed.result!.text).toContain('Start the server and the build.')
  await t.api.workspaces.stop({ params: { id: wsId } })

  const batch = await runBackgroundServer(t.api, t.submit)
  await expectEndedWithTurn(t.api, batch)
  await vi.waitFor(async () => {
    const claimed = (await onEngine(t.runtime, t.pool)).filter(
      (c) => c.labels['berth.workspace'] === batch.workspace_id,
    )
    expect(claimed).toEqual([])
  }, 30_000)
}
