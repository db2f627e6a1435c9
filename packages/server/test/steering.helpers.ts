/** The steering flows of issue 26, run the same way on every runtime: approvals (HTTP and WebSocket), interrupt, messages, structured output. */
import { spawnSync } from 'node:child_process'
import type { Approval, Task } from '@berth/contract'
import { expect, vi } from 'vitest'
import WebSocket from 'ws'
import { ENDED, failure, type Json, type TestServer } from './helpers.js'
import type { agentUser } from './tasks.helpers.js'

type Agent = Awaited<ReturnType<typeof agentUser>>
type Decide = (taskId: string, requestId: string, decision: 'allow' | 'deny', message?: string) => Promise<void>

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`

/** Touch the marker (denied), look, touch it again (allowed), look: four Bash calls, each asked for. */
export const MARKER_PROMPT = `Make the marker. ${bash('touch /workspace/marker')} ${bash('ls -a /workspace')} ${bash('touch /workspace/marker')} ${bash('ls -a /workspace')} [[berth:text Marker done.]]`

/** The requests of a task waiting now (the list route), once there are `n`. */
export async function pendingOnce(a: Agent, taskId: string, n = 1): Promise<Approval[]> {
  return vi.waitFor(
    async () => {
      const { approvals } = await a.api.tasks.approvals.list({ params: { id: taskId } })
      expect(approvals.length).toBeGreaterThanOrEqual(n)
      return approvals
    },
    { timeout: 60_000, interval: 50 },
  )
}

/** Decisions through `POST /v1/tasks/:id/approvals/:request_id`. */
export const httpDecide =
  (a: Agent): Decide =>
  async (taskId, requestId, decision, message) => {
    await a.api.tasks.approvals.decide({
      params: { id: taskId, request_id: requestId },
      body: message === undefined ? { decision } : { decision, message },
    })
  }

/**
 * What the marker task's events show: its decisions in order (by whom), and the output of
 * its `ls` calls (Claude Code runs a read-only `ls` without asking).
 */
export function markerOutcome(events: Json[]) {
  const commands = new Map<string, string>()
  for (const e of events) if (e.type === 'tool_call') commands.set(e.id, e.input.command)
  const results = events.filter((e) => e.type === 'tool_result')
  return {
    decisions: events.filter((e) => e.type === 'permission_decision').map((d) => `${d.decision} by ${d.by}`),
    denial: results[0],
    listings: results.filter((r) => commands.get(r.id)?.startsWith('ls')).map((r) => String(r.output)),
  }
}

/**
 * The marker outcome expected when the first touch was denied with "No markers today" and
 * every later call allowed (whether a read-only `ls` is asked about is the runner's matter).
 */
export function expectMarkerOutcome(events: Json[]): void {
  const { decisions, denial, listings } = markerOutcome(events)
  expect(decisions[0]).toBe('deny by caller')
  expect(decisions.length).toBeGreaterThanOrEqual(2)
  expect(
    decisions.slice(1).every((d) => d === 'allow by caller'),
    decisions.join(),
  ).toBe(true)
  expect(denial).toMatchObject({ is_error: true, output: expect.stringContaining('No markers today') })
  expect(listings).toHaveLength(2)
  expect(listings[0]).not.toContain('marker')
  expect(listings[1]).toContain('marker')
}

/** The next request of `taskId` not in `seen`, or null once the task has ended. */
async function nextRequest(a: Agent, taskId: string, seen: string[]): Promise<Approval | null> {
  return vi.waitFor(
    async () => {
      const { approvals } = await a.api.tasks.approvals.list({ params: { id: taskId } })
      const next = approvals.find((r) => !seen.includes(r.request_id))
      if (next) return next
      const task = await a.api.tasks.get({ params: { id: taskId } })
      expect(ENDED, `task ${taskId} is ${task.status}`).toContain(task.status)
      return null
    },
    { timeout: 60_000, interval: 50 },
  )
}

/**
 * The marker flow: each request is seen as pending (with `pending_approvals` on the task)
 * and decided with `decide`, the first touch denied and every later call allowed. Along
 * the way, another caller's decision is a 404 and a second decision a 409.
 */
export async function markerFlow(a: Agent, other: Agent, decide: Decide): Promise<Task> {
  const { task_id } = await a.submit({ prompt: MARKER_PROMPT, require_approval: ['Bash'] })
  const seen: string[] = []
  for (let request = await nextRequest(a, task_id, seen); request; request = await nextRequest(a, task_id, seen)) {
    expect(request).toMatchObject({ task_id, tool: 'Bash', status: 'pending' })
    expect((await a.api.tasks.get({ params: { id: task_id } })).pending_approvals).toBe(1)
    const ids = { id: task_id, request_id: request.request_id }
    if (seen.length === 0) {
      expect(request.input).toEqual({ command: 'touch /workspace/marker' })
      const theirs = other.api.tasks.approvals.decide({ params: ids, body: { decision: 'allow' } })
      expect((await failure(theirs)).status).toBe(404)
      await decide(task_id, request.request_id, 'deny', 'No markers today')
    } else await decide(task_id, request.request_id, 'allow')
    const again = a.api.tasks.approvals.decide({ params: ids, body: { decision: 'allow' } })
    expect((await failure(again)).status).toBe(409)
    seen.push(request.request_id)
  }
  const task = await a.waitDone(task_id)
  expect(task.status).toBe('completed')
  expect(task.pending_approvals).toBe(0)
  expectMarkerOutcome(await a.events(task_id))
  return task
}

/** A request left alone is denied at its (short) timeout; the agent goes on. */
export async function timeoutFlow(a: Agent): Promise<void> {
  const { task_id } = await a.submit({
    prompt: `Try once. ${bash('touch /workspace/late')} [[berth:text Gave up.]]`,
    require_approval: ['Bash'],
    approval_timeout_s: 1,
  })
  const task = await a.waitDone(task_id)
  expect(task.status).toBe('completed')
  const events = await a.events(task_id)
  expect(events).toContainEqual(
    expect.objectContaining({ type: 'permission_decision', decision: 'deny', by: 'timeout' }),
  )
  expect(events).toContainEqual(expect.objectContaining({ type: 'tool_result', is_error: true }))
  const { approvals } = await a.api.tasks.approvals.list({ params: { id: task_id } })
  expect(approvals).toEqual([])
}

/** A WebSocket of `s` as `token`, with the messages it received. */
export async function socketOf(s: Pick<TestServer, 'url'>, token: string) {
  const socket = new WebSocket(`${s.url.replace('http', 'ws')}/v1/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  const received: Json[] = []
  socket.on('message', (data) => received.push(JSON.parse(String(data))))
  await new Promise((resolve, reject) => {
    socket.once('open', resolve)
    socket.once('error', reject)
  })
  return { socket, received, send: (m: unknown) => socket.send(JSON.stringify(m)) }
}

/** The marker flow over the WebSocket: requests arrive as `task.event`s, decisions go as `decide`. */
export async function socketMarkerFlow(s: Pick<TestServer, 'url'>, a: Agent): Promise<void> {
  const ws = await socketOf(s, a.token)
  try {
    ws.send({
      type: 'submit',
      request_id: 'steer-1',
      task: { mode: 'batch', profile_id: a.profileId, prompt: MARKER_PROMPT, require_approval: ['Bash'] },
    })
    const submitted = await vi.waitFor(() => {
      const m = ws.received.find((r) => r.type === 'submitted')
      expect(m).toBeDefined()
      return m!
    })
    const taskId: string = submitted.task_id
    const seen = new Set<string>()
    await vi.waitFor(
      () => {
        for (const m of ws.received) {
          if (m.type !== 'task.event' || m.event.type !== 'permission_request' || seen.has(m.event.request_id)) continue
          seen.add(m.event.request_id)
          const first = seen.size === 1
          ws.send({
            type: 'decide',
            task_id: taskId,
            request_id: m.event.request_id,
            decision: first ? 'deny' : 'allow',
            ...(first && { message: 'No markers today' }),
          })
          // A second decision of the same request is answered with an error naming the task.
          if (first) ws.send({ type: 'decide', task_id: taskId, request_id: m.event.request_id, decision: 'allow' })
        }
        expect(ws.received.some((m) => m.type === 'task.status' && m.status === 'completed')).toBe(true)
      },
      { timeout: 90_000, interval: 50 },
    )
    expect(ws.received).toContainEqual(expect.objectContaining({ type: 'error', task_id: taskId, code: 'CONFLICT' }))
    expectMarkerOutcome(ws.received.filter((m) => m.type === 'task.event').map((m) => m.event))
  } finally {
    ws.socket.close()
  }
}

/** Host processes whose command line contains `needle` (a container's processes show on the host too). */
export function processesWith(needle: string): string[] {
  const found = spawnSync('pgrep', ['-f', needle], { encoding: 'utf8' })
  return found.stdout.split('\n').filter(Boolean)
}

/**
 * Interrupt a session's `sleep 30` (not a bare `sleep`, which Claude Code refuses; an odd
 * duration names this test's process): the task ends `cancelled` with INTERRUPTED, the
 * sleep is gone, and the follow-up remembers the first prompt.
 */
export async function interruptFlow(a: Agent): Promise<void> {
  const sleep = `sleep 29.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`
  const first = await a.submit({
    mode: 'session',
    prompt: `The codeword is HERON-9. ${bash(`echo start; ${sleep}; echo slept`)} [[berth:text Slept.]]`,
  })
  await vi.waitFor(() => expect(processesWith(sleep)).not.toEqual([]), { timeout: 60_000, interval: 50 })
  await a.api.tasks.interrupt({ params: { id: first.task_id } })
  const ended = await a.waitDone(first.task_id)
  expect(ended.status).toBe('cancelled')
  expect(ended.error?.code).toBe('INTERRUPTED')
  await vi.waitFor(() => expect(processesWith(sleep)).toEqual([]), { timeout: 15_000, interval: 100 })
  // The tool never finished: it was stopped before it could print.
  const results = (await a.events(first.task_id)).flatMap((e) => (e.type === 'tool_result' ? [e.output] : []))
  expect(results.join('\n')).not.toContain('slept')
  // Interrupting a task that ended changes nothing.
  expect(await a.api.tasks.interrupt({ params: { id: first.task_id } })).toMatchObject({ status: 'cancelled' })
  const next = await a.run({ mode: 'session', session_id: first.session_id!, prompt: 'What was it? [[berth:recall]]' })
  expect(next.status).toBe('completed')
  expect(next.result!.text).toContain('HERON-9')
}

/** A message sent while the agent works is a `user_message` its next turn sees; an ended task's is a 409. */
export async function messageFlow(a: Agent): Promise<void> {
  const { task_id } = await a.submit({
    prompt: `Wait for advice. ${bash('echo start; sleep 4; echo done')} [[berth:reply_last_user]]`,
  })
  await vi.waitFor(async () => expect((await a.events(task_id)).some((e) => e.type === 'tool_call')).toBe(true), {
    timeout: 60_000,
    interval: 50,
  })
  await a.api.tasks.messages.send({ params: { id: task_id }, body: { text: 'Use pnpm, not npm' } })
  const task = await a.waitDone(task_id)
  expect(task.status).toBe('completed')
  const events = await a.events(task_id)
  expect(events).toContainEqual(expect.objectContaining({ type: 'user_message', text: 'Use pnpm, not npm' }))
  expect(task.result!.text).toContain('Use pnpm, not npm')
  const late = a.api.tasks.messages.send({ params: { id: task_id }, body: { text: 'too late' } })
  expect((await failure(late)).status).toBe(409)
}

/** `output_schema`: a valid value lands in `result.structured_output`; one the schema cannot accept fails the task. */
export async function structuredFlow(a: Agent): Promise<void> {
  const schema = {
    type: 'object',
    properties: { city: { type: 'string' }, population: { type: 'integer' } },
    required: ['city', 'population'],
  }
  const ok = await a.run({
    prompt: 'Answer. [[berth:json {"city":"Oslo","population":709000}]]',
    output_schema: schema,
  })
  expect(ok.status).toBe('completed')
  expect(ok.result!.structured_output).toEqual({ city: 'Oslo', population: 709000 })
  const bad = await a.run({
    prompt: 'Answer. [[berth:json {"city":"Oslo"}]]',
    output_schema: { ...schema, properties: { ...schema.properties, population: { type: 'integer', minimum: 1e12 } } },
  })
  expect(bad.status).toBe('failed')
  expect(bad.error).toMatchObject({ code: 'OUTPUT_INVALID', error: expect.any(String) })
}

/**
 * A session task waits for a decision and its follow-up is queued behind it: a message to
 * the queued one is a 409 and an interrupt ends it `cancelled` with INTERRUPTED; a cancel of
 * the waiting one ends it `cancelled`, its request with it.
 */
export async function cancelWhileWaitingFlow(a: Agent): Promise<void> {
  const first = await a.submit({
    mode: 'session',
    prompt: `Ask first. ${bash('touch /workspace/never')}`,
    require_approval: ['Bash'],
  })
  await pendingOnce(a, first.task_id)
  const queued = await a.submit({ mode: 'session', session_id: first.session_id!, prompt: 'And then?' })
  expect((await a.api.tasks.get({ params: { id: queued.task_id } })).status).toBe('queued')
  const early = a.api.tasks.messages.send({ params: { id: queued.task_id }, body: { text: 'hello' } })
  expect((await failure(early)).status).toBe(409)
  const stopped = await a.api.tasks.interrupt({ params: { id: queued.task_id } })
  expect(stopped).toMatchObject({ status: 'cancelled', error: { code: 'INTERRUPTED' } })
  await a.api.tasks.cancel({ params: { id: first.task_id } })
  const ended = await a.waitDone(first.task_id)
  expect(ended).toMatchObject({ status: 'cancelled', pending_approvals: 0 })
  expect((await a.api.tasks.approvals.list({ params: { id: first.task_id } })).approvals).toEqual([])
}
