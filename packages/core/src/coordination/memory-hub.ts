import { systemClock, type Clock } from '../ports/clock.js'
import type { JobPriority } from './port.js'

/** A job in a memory queue. */
export interface MemoryJob {
  id: string
  owner: string
  priority: JobPriority
  payload: string
  rank: number
  /** Order of adding (or of going back after a retry) within a rank. */
  seq: number
  state: 'waiting' | 'active' | 'delayed'
  readyAt: number
  holder: string | null
  token: string
  deliveries: number
}

/** One subscription: deliveries are queued as microtasks, so each sees publish order. */
export interface MemorySubscriber {
  instance: string
  handler: (message: unknown) => void
}

/** A registered delayed-job processor. */
export interface MemoryProcessor {
  instance: string
  handler: (job: { id: string; queue: string; runAt: number; payload: unknown }) => Promise<void>
}

/**
 * The state several memory-driver instances share: what a Redis server is to the redis
 * driver. One process only; everything is lost when it ends.
 */
export interface MemoryHub {
  readonly clock: Clock
  /** How long the delayed-job timer sleeps at most (so a manual clock's moves are seen). */
  readonly pollMs: number
  seq: number
  queues: Map<string, Map<string, MemoryJob>>
  slots: Map<string, Map<string, number>>
  buckets: Map<string, { tokens: number; at: number }>
  once: Map<string, { value: string; expiresAt: number }>
  channels: Map<string, Set<MemorySubscriber>>
  delayed: Map<string, Map<string, { runAt: number; payload: string }>>
  processors: Map<string, MemoryProcessor[]>
  /** Instance id → when it closed (null while open) and its lease. */
  instances: Map<string, { closedAt: number | null; leaseMs: number }>
  timer: ReturnType<typeof setTimeout> | null
}

/** Options of {@link memoryHub}. */
export interface MemoryHubOptions {
  /** Time source for leases, ttls, buckets and due times (default: the wall clock). */
  clock?: Clock
  /** Longest sleep of the delayed-job timer in ms (default 1000). */
  pollMs?: number
}

/**
 * A shared in-memory backend: memory-driver instances opened on one hub coordinate as redis
 * instances on one server do (tests run several "instances" in one process this way).
 *
 * @example
 * ```ts
 * const hub = memoryHub({ clock: manualClock(0) })
 * const a = memoryCoordination({ hub }), b = memoryCoordination({ hub })
 * ```
 */
export function memoryHub(opts: MemoryHubOptions = {}): MemoryHub {
  return {
    clock: opts.clock ?? systemClock,
    pollMs: opts.pollMs ?? 1000,
    seq: 0,
    queues: new Map(),
    slots: new Map(),
    buckets: new Map(),
    once: new Map(),
    channels: new Map(),
    delayed: new Map(),
    processors: new Map(),
    instances: new Map(),
    timer: null,
  }
}

/** Whether an instance's lease still holds: open, or closed less than its lease ago. */
export function holds(hub: MemoryHub, instance: string | null): boolean {
  const i = instance === null ? undefined : hub.instances.get(instance)
  return !!i && (i.closedAt === null || hub.clock.now() < i.closedAt + i.leaseMs)
}

/** Arm the delayed-job timer for the earliest pending job that has a processor. */
export function armDelayed(hub: MemoryHub): void {
  if (hub.timer) clearTimeout(hub.timer)
  hub.timer = null
  let earliest = Infinity
  for (const [queue, jobs] of hub.delayed) {
    if (!hub.processors.get(queue)?.length) continue
    for (const j of jobs.values()) earliest = Math.min(earliest, j.runAt)
  }
  if (earliest === Infinity) return
  const wait = Math.min(Math.max(0, earliest - hub.clock.now()), hub.pollMs)
  hub.timer = setTimeout(() => runDue(hub), wait)
  hub.timer.unref?.()
}

/** Hand each due job to one processor of its queue (round robin), then re-arm. */
function runDue(hub: MemoryHub): void {
  hub.timer = null
  const now = hub.clock.now()
  for (const [queue, jobs] of hub.delayed) {
    const procs = hub.processors.get(queue)
    if (!procs?.length) continue
    for (const [id, j] of [...jobs].sort((x, y) => x[1].runAt - y[1].runAt)) {
      if (j.runAt > now) continue
      jobs.delete(id)
      const proc = procs.shift()!
      procs.push(proc)
      void proc.handler({ id, queue, runAt: j.runAt, payload: JSON.parse(j.payload) }).catch(() => {})
    }
    if (jobs.size === 0) hub.delayed.delete(queue)
  }
  armDelayed(hub)
}
