/**
 * What the soak proves after the chaos, as the job systems we trust prove they lose nothing:
 * every accepted task reached a definite end with a contract outcome; each workspace's
 * event log is dense (seq 1..n, no gap, no duplicate); what the live WebSocket delivered
 * equals storage; no 5xx and no error log line in any server run; after a clean stop no
 * container or volume is left but warm sessions', and every volume is labelled and
 * belongs to a live workspace.
 */
import { isDeepStrictEqual } from 'node:util'
import type { ContainerRuntime } from '@berth/core'
import { waitUntil } from '@berth/testkit'
import { TERMINAL, type ApiClient, type Json, type Reply } from './api.js'
import type { TaskObserver } from './observer.js'
import { logLines, type Standalone } from './standalone.js'

/** One submission the soak made. */
export interface SoakTask {
  /** `null` when the submit was refused (that is a violation unless it is a 4xx by design). */
  id: string | null
  kind: string
  submitStatus: number
  sessionId?: string | null
  cancelRequested?: boolean
  error?: string
}

/** The outcome each kind must end with when no cancel or kill intervened. */
export const EXPECTED: Record<string, string> = {
  tools: 'completed',
  quick: 'completed',
  slow: 'completed',
  session: 'completed',
  'follow-up': 'completed',
  'turn-limit': 'failed:TURN_LIMIT_EXCEEDED',
  'model-error': 'failed:MODEL_ERROR',
}

export type Call = (method: string, path: string, json?: unknown) => Promise<Reply>

export async function pages<T>(call: Call, path: string, key: string, cursor: 'page' | 'after'): Promise<T[]> {
  const out: T[] = []
  for (let page = 1, after = 0; ; page++) {
    const sep = path.includes('?') ? '&' : '?'
    const r = await call('GET', `${path}${sep}limit=100&${cursor === 'page' ? `page=${page}` : `after=${after}`}`)
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body)}`)
    const items = r.body[key] as T[]
    out.push(...items)
    if (items.length < 100) return out
    after = (items.at(-1) as { seq: number }).seq
  }
}

/**
 * The task, event and stream checks (the server still running).
 *
 * @example
 * ```ts
 * const { figures, violations } = await checkTasks({ api, call, observer, tasks, log })
 * ```
 */
export async function checkTasks(ctx: {
  api: ApiClient
  call: Call
  observer: TaskObserver
  tasks: SoakTask[]
  log: (line: string) => void
}): Promise<{ figures: Record<string, number | string>; violations: string[] }> {
  const { call, observer, tasks } = ctx
  const violations: string[] = []
  for (const t of tasks) if (!t.id) violations.push(`a ${t.kind} submit was refused: ${t.submitStatus} ${t.error}`)

  // Every task the server knows (some submits' answers were lost to a SIGKILL) must end.
  const all = await waitUntil(
    async () => {
      const list = await pages<Json>(call, '/v1/tasks', 'tasks', 'page')
      return list.every((t) => (TERMINAL as readonly string[]).includes(t.status)) ? list : undefined
    },
    { what: 'every task to reach a definite end', timeout: 180_000, interval: 200 },
  ).catch(async (err: Error) => {
    const list = await pages<Json>(call, '/v1/tasks', 'tasks', 'page')
    for (const t of list.filter((x) => !(TERMINAL as readonly string[]).includes(x.status)))
      violations.push(`task ${t.task_id} stuck in ${t.status}`)
    violations.push(err.message)
    return list
  })
  const byId = new Map(all.map((t) => [t.task_id as string, t]))
  const outcomes: Record<string, number> = {}
  for (const t of tasks) {
    if (!t.id) continue
    const got = byId.get(t.id)
    if (!got) {
      violations.push(`task ${t.id} was accepted (202) but the server no longer lists it`)
      continue
    }
    const outcome = got.status === 'failed' ? `failed:${got.error?.code}` : (got.status as string)
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    const allowed = [EXPECTED[t.kind], 'failed:CONTAINER_FAILED', ...(t.cancelRequested ? ['cancelled'] : [])]
    if (!allowed.includes(outcome))
      violations.push(`task ${t.id} (${t.kind}) ended ${outcome}${got.error ? `: ${got.error.error}` : ''}`)
  }
  const unknown = all.filter((t) => !tasks.some((s) => s.id === t.task_id))

  // Dense logs: each workspace's seq runs 1..n.
  let events = 0
  const workspaces = new Set(all.map((t) => t.workspace_id as string))
  for (const ws of workspaces) {
    const log = await pages<Json>(call, `/v1/workspaces/${ws}/transcript`, 'events', 'after')
    events += log.length
    const bad = log.findIndex((e, i) => e.seq !== i + 1)
    if (bad >= 0)
      violations.push(`workspace ${ws}: event ${bad} has seq ${log[bad]!.seq} (want ${bad + 1}): a gap or a duplicate`)
  }

  // The live stream equals storage: what the last subscription to each task received.
  let streamed = 0
  for (const t of all) {
    const id = t.task_id as string
    const stored = await pages<Json>(call, `/v1/tasks/${id}/events`, 'events', 'after')
    const sub = observer.get(id)
    if (!sub) continue // submitted by a request whose answer was lost: nobody subscribed
    const live = await waitUntil(async () => (sub.events.length >= stored.length ? sub.events : undefined), {
      what: 'the stream',
      timeout: 15_000,
      interval: 200,
    }).catch(() => sub.events)
    streamed += live.length
    if (!isDeepStrictEqual(live, stored)) {
      const i = live.findIndex((e, k) => !isDeepStrictEqual(e, stored[k]))
      violations.push(
        `task ${id}: the WebSocket delivered ${live.length} events, storage holds ${stored.length}; first difference at ${i}: ${JSON.stringify(live[i])} vs ${JSON.stringify(stored[i])}`,
      )
    }
    if (!(TERMINAL as readonly string[]).includes(sub.status ?? ''))
      violations.push(`task ${id}: the WebSocket never said it ended (last: ${sub.status})`)
  }
  violations.push(...observer.problems.map((p) => `WebSocket: ${p}`))
  const fivexx = ctx.api.statuses.filter((s) => s >= 500).length
  if (fivexx) violations.push(`${fivexx} responses were 5xx`)

  const figures: Record<string, number | string> = {
    tasks: all.length,
    tasks_unknown_to_client: unknown.length,
    ...Object.fromEntries(Object.entries(outcomes).map(([k, v]) => [`outcome ${k}`, v])),
    workspaces: workspaces.size,
    events_checked: events,
    ws_events_compared: streamed,
    http_requests: ctx.api.statuses.length,
    http_5xx: fivexx,
  }
  return { figures, violations }
}

/**
 * After a clean stop: no container or volume of the pool but warm sessions' (idle warm
 * containers aside, at most `poolMin`), every volume labelled and belonging to a live
 * workspace, no unlabelled workspace volume.
 *
 * @example
 * ```ts
 * const { violations } = await checkLeftovers({ outside, pool, poolMin: 2, sessions })
 * ```
 */
export async function checkLeftovers(ctx: {
  outside: ContainerRuntime
  pool: string
  poolMin: number
  /** The session workspaces that must still be warm (others were deleted). */
  warmWorkspaces: Set<string>
  /** Every persistent workspace the soak made, deleted or not, to look for unlabelled volumes. */
  persistentWorkspaces: Set<string>
  volumeExists: (name: string) => Promise<{ labels: Record<string, string> } | null>
}): Promise<{ figures: Record<string, number | string>; violations: string[] }> {
  const violations: string[] = []
  const containers = await ctx.outside.list({ labels: { 'berth.pool': ctx.pool } })
  const idle = containers.filter((c) => !c.labels['berth.workspace'])
  const held = containers.filter((c) => c.labels['berth.workspace'])
  if (idle.length > ctx.poolMin)
    violations.push(`${idle.length} idle containers left, more than the ${ctx.poolMin} kept warm`)
  for (const c of held) {
    if (!ctx.warmWorkspaces.has(c.labels['berth.workspace']!))
      violations.push(`container ${c.name} outlived its task (workspace ${c.labels['berth.workspace']})`)
  }
  const volumes = await ctx.outside.listVolumes({ labels: { 'berth.pool': ctx.pool } })
  for (const v of volumes) {
    const ws = v.labels['berth.workspace']
    if (!ws || !v.labels['berth.owner']) violations.push(`volume ${v.name} lacks its owner or workspace label`)
    else if (!ctx.warmWorkspaces.has(ws)) violations.push(`volume ${v.name} outlived its workspace ${ws}`)
  }
  for (const ws of ctx.persistentWorkspaces) {
    const name = `berth-${ws.replace('_', '-')}`
    const found = await ctx.volumeExists(name)
    if (found && found.labels['berth.pool'] !== ctx.pool)
      violations.push(`volume ${name} carries no berth.pool label: ${JSON.stringify(found.labels)}`)
    if (found && !ctx.warmWorkspaces.has(ws)) violations.push(`volume ${name} outlived its deleted workspace`)
  }
  return {
    figures: {
      containers_left_idle: idle.length,
      containers_left_warm_sessions: held.length,
      volumes_left: volumes.length,
    },
    violations,
  }
}

/**
 * Every server run's log: no error line, no 5xx response.
 *
 * @example
 * ```ts
 * const violations = checkLogs(runs)
 * ```
 */
export function checkLogs(runs: Standalone[]): string[] {
  const violations: string[] = []
  runs.forEach((run, i) => {
    for (const line of logLines(run.lines)) {
      if (line.level === 'error')
        violations.push(`server run ${i}: error log line: ${JSON.stringify(line).slice(0, 400)}`)
      if (line.msg === 'request' && typeof line.status === 'number' && line.status >= 500) {
        violations.push(`server run ${i}: ${line.status} on ${String(line.method)} ${String(line.path)}`)
      }
    }
  })
  return violations
}
