/**
 * Idle sessions yield to waiting work (issue 42), the scenarios every runtime runs. A
 * session whose task ended keeps its container for its idle time (long here, so that a
 * task waiting for it fails the test): ten of one caller hold the whole memory budget and
 * another caller's task starts at once, the longest-idle one released; five hold the
 * profile's five slots and a sixth submit is admitted; the released sessions resume their
 * conversation on their next follow-up. With five tasks running, the 429 says when the first
 * one ends at the latest.
 */
import type { Task } from '@berth/client'
import { expect, vi } from 'vitest'
import { ADMIN_TOKEN, failure, waitForTask, type TestServer } from './helpers.js'
import { agentUser } from './tasks.helpers.js'

const GIB = 1024 ** 3

/** The pool's default container cap (2 GiB) ten times: ten sessions hold the whole budget. */
export const TEN_SESSIONS_BYTES = 10 * 2 * GIB

/** A session's idle time no test waits out: a task left waiting for one fails by its timeout. */
export const LONG_IDLE_MS = 60 * 60_000

/** What the scenarios need of a server: pool `max` above 10, the memory budget {@link TEN_SESSIONS_BYTES}, profile concurrency 5, metrics on, {@link LONG_IDLE_MS}. */
export type YieldServer = TestServer

/** The value of one series in `GET /metrics`. */
async function gauge(s: TestServer, series: string): Promise<number | undefined> {
  const text = await (await s.request('/metrics', { token: ADMIN_TOKEN })).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/** A caller of `s` with a second profile (concurrency is per profile), and its workspaces' statuses. */
async function caller(s: TestServer, waitMs: number) {
  const a = await agentUser(s, { waitMs })
  const second = await a.api.profiles.create({
    body: { name: 'Second', slug: 'second', api_key_id: a.keyId, default_tools: ['Bash'] },
  })
  const status = async (wsId: string) => (await a.api.workspaces.get({ params: { id: wsId } })).status
  const removeAll = async (tasks: { workspace_id: string | null }[]) => {
    for (const t of tasks) await a.api.workspaces.delete({ params: { id: t.workspace_id! } })
  }
  return { ...a, secondProfileId: second.id, status, removeAll }
}

/**
 * Ten idle sessions of one caller (two profiles of five) hold the whole memory budget; a
 * batch task of another caller waits for memory and starts: the session idle the longest
 * yields its container, and only it. Its next follow-up resumes its conversation.
 */
export async function tenIdleSessionsYieldMemory(s: YieldServer, waitMs: number): Promise<void> {
  const a = await caller(s, waitMs)
  const b = await agentUser(s, { waitMs })
  // The first session ends before the nine others start: it is the one idle the longest.
  const first = await a.run({ mode: 'session', prompt: 'The first codeword is HERON-1.' })
  expect(first.status).toBe('completed')
  const nine = await Promise.all(
    Array.from({ length: 9 }, (_, i) =>
      a.submit({
        mode: 'session',
        profile_id: i < 4 ? a.profileId : a.secondProfileId,
        prompt: `Session ${i + 2}. [[berth:text Idle now.]]`,
      }),
    ),
  )
  const rest = await Promise.all(nine.map((n) => a.waitDone(n.task_id)))
  expect(rest.map((t) => t.status)).toEqual(Array(9).fill('completed'))
  await vi.waitFor(async () => expect(await gauge(s, 'berth_idle_sessions')).toBe(10), 30_000)
  expect(await gauge(s, 'berth_idle_session_memory_bytes')).toBe(TEN_SESSIONS_BYTES)
  // Each of them keeps its agent living between tasks (what it would cost is counted).
  expect(await gauge(s, 'berth_idle_living_agents')).toBe(10)

  // Another caller's task: its container does not fit beside the ten, so a session yields.
  const other = await b.submit({ prompt: 'Room for me? [[berth:text Started.]]' })
  const ran = await b.waitDone(other.task_id)
  expect(ran.status).toBe('completed')
  expect(ran.result?.text).toContain('Started.')
  expect(await a.status(first.workspace_id!)).toBe('idle')
  for (const t of rest) expect(await a.status(t.workspace_id!)).toBe('running')
  expect(await gauge(s, 'berth_idle_sessions')).toBe(9)
  expect(await gauge(s, 'berth_idle_living_agents')).toBe(9)

  // The released session resumes its conversation in a new container (the batch task's memory is free again).
  const follow = await a.run({
    mode: 'session',
    session_id: first.session_id!,
    prompt: 'What came before? [[berth:recall_all]]',
  })
  expect(follow.status).toBe('completed')
  expect(follow.result?.text).toContain('HERON-1')
  await a.removeAll([first, ...rest])
}

/**
 * Five idle sessions hold the profile's five slots: a sixth submit is admitted (the session
 * idle the longest yields its slot), and that session's follow-up is admitted too, resuming
 * its conversation. With five tasks running instead, a submit is refused with a
 * `Retry-After` that says when the first of them ends at the latest.
 */
export async function idleSessionsYieldSlots(s: YieldServer, waitMs: number): Promise<void> {
  const a = await caller(s, waitMs)
  const first = await a.run({ mode: 'session', prompt: 'The codeword is KESTREL-5.' })
  const four = await Promise.all(
    Array.from({ length: 4 }, (_, i) => a.submit({ mode: 'session', prompt: `Session ${i + 2}.` })),
  )
  const rest = await Promise.all(four.map((n) => a.waitDone(n.task_id)))
  expect([first, ...rest].map((t) => t.status)).toEqual(Array(5).fill('completed'))

  const sixth = await a.submit({ mode: 'session', prompt: 'A sixth. [[berth:text Admitted.]]' })
  const ran = await a.waitDone(sixth.task_id)
  expect(ran.result?.text).toContain('Admitted.')
  expect(await a.status(first.workspace_id!)).toBe('idle')
  for (const t of rest) expect(await a.status(t.workspace_id!)).toBe('running')
  const follow = await a.run({
    mode: 'session',
    session_id: first.session_id!,
    prompt: 'Say it back. [[berth:recall_all]]',
  })
  expect(follow.result?.text).toContain('KESTREL-5')
  await a.removeAll([first, ...rest, ran])

  // Five tasks that run (each its own time limit): no idle session to yield.
  const limits = [700, 300, 500, 600, 400]
  const running = await Promise.all(
    limits.map((max_duration_s) =>
      a.submit({ mode: 'session', max_duration_s, prompt: 'Hold on. [[berth:tool Bash {"command":"sleep 600"}]]' }),
    ),
  )
  const views: Task[] = await Promise.all(
    running.map((r) => waitForTask(a.api, r.task_id, { until: (t) => t.status === 'running', timeout: waitMs })),
  )
  const refused = await failure(a.submit({ prompt: 'No room.' }))
  expect(refused.status).toBe(429)
  expect(refused.code).toBe('CONCURRENCY_LIMIT')
  // The first to end at the latest: its start, its limit and the 15 s an interrupted run gets.
  const freesAt = Math.min(...views.map((t, i) => Date.parse(t.started_at!) + limits[i]! * 1000 + 15_000))
  const retryAfter = Math.ceil((freesAt - s.clock.now()) / 1000)
  expect(refused.details).toMatchObject({ limit: 5, running: 5, retry_after: retryAfter })
  expect(refused.details?.frees_at).toBe(new Date(freesAt).toISOString())
  expect(refused.headers?.get('retry-after')).toBe(String(retryAfter))
  for (const r of running) await a.api.tasks.cancel({ params: { id: r.task_id } })
  await a.removeAll(running)
}
