/**
 * A session's living agent (issue 42) under what callers do to a follow-up, run the same
 * way on every runtime: interrupt, cancel, approvals, messages and time limits work per
 * task as they do for a task in a new agent; a follow-up whose settings changed gets a new
 * agent; deleting the workspace takes the agent and its background server with it. Each
 * case starts a session whose first task leaves a server running in the background
 * ({@link startLiving}); the follow-ups ask for the Claude Code pid they run under and
 * probe the server, which tells a living agent (same pid, the server answers) from a new
 * one that resumed the conversation (new pid, the server gone, the first prompt recalled).
 */
import type { SubmitTaskInput, Task } from '@berth/client'
import type { ContainerRuntime } from '@berth/core'
import { expect, vi } from 'vitest'
import { AGENT_PID, SERVED, bash, getServer, serverPort, toolOutputs } from './background-work.helpers.js'
import { ENDED, waitForTask, type TestServer } from './helpers.js'
import { onEngine } from './pool.helpers.js'
import { MARKER_PROMPT, expectMarkerOutcome, processesWith } from './steering.helpers.js'
import type { agentUser } from './tasks.helpers.js'

/** A caller of one server (or instance): how it submits and reads. */
export type Caller = Pick<Awaited<ReturnType<typeof agentUser>>, 'api' | 'submit' | 'events'>

/** A caller on a server with a runtime: what every case needs. */
export type LivingCase = Awaited<ReturnType<typeof agentUser>> & {
  s: TestServer
  runtime: ContainerRuntime
  pool: string
}

/** A session whose agent lives with a server it started in the background. */
export interface Living {
  session: string
  wsId: string
  port: number
  /** `agent-pid:N@T` of the Claude Code process that started it (see `AGENT_PID`). */
  pid: string
}

/** The first prompt, which a resumed conversation recalls. */
export const FIRST_PROMPT = 'The codeword is KESTREL-5.'

/** Every task of a case gets this long (a task held open would end by it, not hang the case). */
const TASK_MS = 180_000

const pidsIn = (outputs: string[]) => outputs.filter((o) => o.startsWith('agent-pid:'))

/** The processes of the session's background server (pgrep takes a regular expression). */
export const serving = (l: Living) => processesWith(`listen\\(${l.port}\\)`)

/** A `sleep` no other test's process has on its command line (not a bare `sleep`: Claude Code refuses those). */
const uniqueSleep = () => `sleep 29.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`

/** The task once it ended, approving every request it makes on the way. */
export async function allowingAll(t: Caller, taskId: string): Promise<Task> {
  return vi.waitFor(
    async () => {
      const { approvals } = await t.api.tasks.approvals.list({ params: { id: taskId } })
      for (const a of approvals)
        await t.api.tasks.approvals
          .decide({ params: { id: taskId, request_id: a.request_id }, body: { decision: 'allow' } })
          .catch(() => {})
      const task = await t.api.tasks.get({ params: { id: taskId } })
      expect(ENDED, `task ${taskId} is ${task.status}`).toContain(task.status)
      return task
    },
    { timeout: TASK_MS, interval: 100 },
  )
}

/** Start a session whose agent leaves a server running in the background; wait until the workspace shows it. */
export async function startLiving(t: Caller, body: Partial<SubmitTaskInput> = {}): Promise<Living> {
  const port = serverPort()
  const server = `node -e "require('http').createServer((q,r)=>r.end('bg-'+'served')).listen(${port})"`
  const sub = await t.submit({
    mode: 'session',
    prompt: `${FIRST_PROMPT} ${bash(server, true)} ${bash(AGENT_PID)} [[berth:text Serving.]]`,
    ...body,
  })
  const first = await allowingAll(t, sub.task_id)
  expect(first.status, JSON.stringify(first.error)).toBe('completed')
  const [pid] = pidsIn(await toolOutputs(t.api, sub.task_id))
  expect(pid).toMatch(/^agent-pid:\d+@\d+$/)
  await vi.waitFor(
    async () => {
      const ws = await t.api.workspaces.get({ params: { id: first.workspace_id! } })
      expect(ws.agent?.background.map((b) => b.description)).toEqual([expect.stringContaining(`listen(${port})`)])
    },
    { timeout: 60_000, interval: 250 },
  )
  return { session: first.session_id!, wsId: first.workspace_id!, port, pid: pid! }
}

/** Submit a follow-up of the session (not waited for). */
export function submitFollowUp(t: Caller, l: Living, prompt: string, body: Partial<SubmitTaskInput> = {}) {
  return t.submit({ mode: 'session', session_id: l.session, prompt, ...body })
}

/** Run a follow-up of the session to its end. */
export async function followUp(t: Caller, l: Living, prompt: string, body: Partial<SubmitTaskInput> = {}) {
  const sub = await submitFollowUp(t, l, prompt, body)
  return waitForTask(t.api, sub.task_id, { timeout: TASK_MS, interval: 250 })
}

/** Tool calls that probe the server and print the agent's pid. */
export const probes = (l: Living) => `${bash(getServer(l.port))} ${bash(AGENT_PID)}`

/** The follow-up ran in the session's living agent: the same Claude Code process, and the server answered. */
export async function expectSameAgent(t: Caller, l: Living, task: Task): Promise<void> {
  expect(task.status, JSON.stringify(task.error)).toBe('completed')
  const outputs = await toolOutputs(t.api, task.task_id)
  expect(outputs).toContain(SERVED)
  expect(pidsIn(outputs)).toEqual([l.pid])
}

/**
 * The follow-up (prompted with {@link probes} and `[[berth:recall_all]]`) ran in a new agent
 * that resumed the conversation: another Claude Code process, the old agent's server gone
 * with it, and the first prompt remembered.
 */
export async function expectNewAgent(t: Caller, l: Living, task: Task): Promise<string> {
  expect(task.status, JSON.stringify(task.error)).toBe('completed')
  const outputs = await toolOutputs(t.api, task.task_id)
  expect(outputs[0]).toBe('stopped:ECONNREFUSED')
  const [pid] = pidsIn(outputs)
  expect(pid).toMatch(/^agent-pid:\d+@\d+$/)
  expect(pid).not.toBe(l.pid)
  expect(task.result!.text).toContain(FIRST_PROMPT)
  return pid!
}

/** An interrupt of a follow-up ends that task (INTERRUPTED); the agent and its server live on for the next. */
export async function interruptKeepsAgent(t: LivingCase): Promise<void> {
  const l = await startLiving(t)
  const sleep = uniqueSleep()
  const sub = await submitFollowUp(t, l, `Wait. ${bash(`echo start; ${sleep}; echo slept`)} [[berth:text Slept.]]`)
  await vi.waitFor(() => expect(processesWith(sleep)).not.toEqual([]), { timeout: 60_000, interval: 50 })
  await t.api.tasks.interrupt({ params: { id: sub.task_id } })
  const ended = await waitForTask(t.api, sub.task_id, { timeout: TASK_MS })
  expect(ended).toMatchObject({ status: 'cancelled', error: { code: 'INTERRUPTED' } })
  await vi.waitFor(() => expect(processesWith(sleep)).toEqual([]), { timeout: 15_000, interval: 100 })
  await expectSameAgent(t, l, await followUp(t, l, `Still there? ${probes(l)} [[berth:text Checked.]]`))
}

/** A cancel of a follow-up ends the agent and its server; the next follow-up resumes the conversation in a new one. */
export async function cancelEndsAgent(t: LivingCase): Promise<void> {
  const l = await startLiving(t)
  const sub = await submitFollowUp(t, l, 'Take your time. [[berth:slow 300]] [[berth:turns 8]]')
  await vi.waitFor(
    async () => expect((await t.events(sub.task_id)).some((e) => e.type === 'token')).toBe(true),
    TASK_MS,
  )
  expect((await t.api.tasks.cancel({ params: { id: sub.task_id } })).status).toBe('cancelled')
  // The agent went with the cancelled task: the workspace shows none.
  await vi.waitFor(
    async () => expect((await t.api.workspaces.get({ params: { id: l.wsId } })).agent).toBeNull(),
    30_000,
  )
  await expectNewAgent(t, l, await followUp(t, l, `Who is there? ${probes(l)} [[berth:recall_all]]`))
}

/**
 * Approvals in a living agent: a session whose tasks ask before Bash (its first task's
 * calls allowed), then a follow-up's requests decided one by one (the first denied), its
 * events and result as for any task, in the same agent.
 */
export async function approvalsInLivingAgent(t: LivingCase): Promise<void> {
  const rules = { require_approval: ['Bash'] }
  const l = await startLiving(t, rules)
  const sub = await submitFollowUp(t, l, `${MARKER_PROMPT} ${bash(AGENT_PID)} ${bash(getServer(l.port))}`, rules)
  const decided: string[] = []
  await vi.waitFor(
    async () => {
      const { approvals } = await t.api.tasks.approvals.list({ params: { id: sub.task_id } })
      for (const a of approvals) {
        if (decided.includes(a.request_id)) continue
        expect((await t.api.tasks.get({ params: { id: sub.task_id } })).pending_approvals).toBe(1)
        const first = decided.length === 0
        if (first) expect(a.input).toEqual({ command: 'touch /workspace/marker' })
        await t.api.tasks.approvals.decide({
          params: { id: sub.task_id, request_id: a.request_id },
          body: first ? { decision: 'deny', message: 'No markers today' } : { decision: 'allow' },
        })
        decided.push(a.request_id)
      }
      const task = await t.api.tasks.get({ params: { id: sub.task_id } })
      expect(ENDED, `task ${sub.task_id} is ${task.status}`).toContain(task.status)
    },
    { timeout: TASK_MS, interval: 100 },
  )
  const task = await t.api.tasks.get({ params: { id: sub.task_id } })
  expect(task).toMatchObject({ status: 'completed', pending_approvals: 0 })
  expectMarkerOutcome(await t.events(sub.task_id))
  await expectSameAgent(t, l, task)
}

/** A message sent during a follow-up reaches the living agent's next turn. */
export async function messageReachesAgent(t: LivingCase): Promise<void> {
  const l = await startLiving(t)
  const sub = await submitFollowUp(
    t,
    l,
    `Wait for advice. ${bash('echo start; sleep 4; echo done')} ${probes(l)} [[berth:reply_last_user]]`,
  )
  await vi.waitFor(async () => expect((await t.events(sub.task_id)).some((e) => e.type === 'tool_call')).toBe(true), {
    timeout: TASK_MS,
    interval: 50,
  })
  await t.api.tasks.messages.send({ params: { id: sub.task_id }, body: { text: 'Use pnpm, not npm' } })
  const task = await waitForTask(t.api, sub.task_id, { timeout: TASK_MS })
  expect(await t.events(sub.task_id)).toContainEqual(
    expect.objectContaining({ type: 'user_message', text: 'Use pnpm, not npm' }),
  )
  expect(task.result!.text).toContain('Use pnpm, not npm')
  await expectSameAgent(t, l, task)
}

/** A follow-up past its `max_duration_s` ends TIME_LIMIT_EXCEEDED; the session (its agent, its server) goes on after it. */
export async function timeLimitInLivingAgent(t: LivingCase): Promise<void> {
  const l = await startLiving(t)
  const sleep = uniqueSleep()
  const sub = await submitFollowUp(
    t,
    l,
    `Too long. ${bash(`echo start; ${sleep}; echo slept`)} [[berth:text Never.]]`,
    {
      max_duration_s: 3,
    },
  )
  const ended = await waitForTask(t.api, sub.task_id, { timeout: TASK_MS })
  expect(ended).toMatchObject({ status: 'failed', error: { code: 'TIME_LIMIT_EXCEEDED' } })
  await vi.waitFor(() => expect(processesWith(sleep)).toEqual([]), { timeout: 30_000, interval: 100 })
  // Stopped as an interrupt stops it: the agent and its server live on, and the conversation goes on.
  const next = await followUp(t, l, `And now? ${probes(l)} [[berth:recall_all]]`)
  await expectSameAgent(t, l, next)
  expect(next.result!.text).toContain(FIRST_PROMPT)
}

/**
 * The profile's CLAUDE.md changes between two tasks: the follow-up runs in a new agent
 * (resuming the conversation), and the old one ended with what it ran in the background.
 */
export async function changedSettingsNewAgent(t: LivingCase): Promise<void> {
  const profile = await t.api.profiles.create({
    body: { name: 'Changing', slug: `changing-${Date.now()}`, api_key_id: t.keyId, default_tools: ['Bash'] },
  })
  const l = await startLiving(t, { profile_id: profile.id })
  await t.api.profiles.update({ params: { id: profile.id }, body: { claude_md: 'Answer in French.' } })
  const next = await followUp(t, l, `Who is there? ${probes(l)} [[berth:recall_all]]`, { profile_id: profile.id })
  const pid = await expectNewAgent(t, l, next)
  const ws = await t.api.workspaces.get({ params: { id: l.wsId } })
  expect(ws.agent).toMatchObject({ tasks: 1, background: [] })
  // The new agent lives on as the old one did.
  const again = await followUp(t, l, `Again. ${bash(AGENT_PID)}`, { profile_id: profile.id })
  expect(pidsIn(await toolOutputs(t.api, again.task_id))).toEqual([pid])
  expect(serving(l)).toEqual([])
}

/** Deleting the workspace of a living agent takes the container, the agent and its server, with no error logged. */
export async function deleteTakesEverything(t: LivingCase): Promise<void> {
  const l = await startLiving(t)
  const logged = t.s.logs.length
  expect(serving(l)).not.toEqual([])
  await t.api.workspaces.delete({ params: { id: l.wsId } })
  const on = await onEngine(t.runtime, t.pool)
  expect(on.filter((c) => c.labels['berth.workspace'] === l.wsId)).toEqual([])
  await vi.waitFor(() => expect(serving(l)).toEqual([]), { timeout: 15_000, interval: 100 })
  const problems = t.s.logs.slice(logged).filter((line) => /"level":"(warn|error)"/.test(line))
  expect(problems).toEqual([])
}
