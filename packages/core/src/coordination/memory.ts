import { randomUUID } from 'node:crypto'
import type { Clock } from '../ports/clock.js'
import { armDelayed, memoryHub, type MemoryHub, type MemorySubscriber } from './memory-hub.js'
import { memoryQueue } from './memory-queue.js'
import { checkQueueName } from './order.js'
import type { Coordination, SlotLease } from './port.js'
import { checkRateSettings, rateDecision } from './rate.js'

/** Options of {@link memoryCoordination}. */
export interface MemoryCoordinationOptions {
  /** The backend shared with other instances (default: a hub of its own). */
  hub?: MemoryHub
  /** Clock of a hub created here (ignored with `hub`). */
  clock?: Clock
  /** This instance's id (default: a random one). */
  instanceId?: string
  /** How long jobs it holds stay leased after it closes or dies (default 30 s). */
  leaseMs?: number
}

/** Buckets kept before idle full ones are dropped, as `tokenBucket` does. */
const MAX_BUCKETS = 100_000

/**
 * The memory coordination driver: today's single-process behaviour, the embedded default.
 * Instances opened on one `memoryHub` share queues, slots, buckets, keys, channels and
 * delayed jobs, as redis instances on one server do.
 *
 * @example
 * ```ts
 * const coord = memoryCoordination()
 * const lease = await coord.slots.acquire('prof_1', 5, 'ws_1', 60_000) // null when 5 are held
 * await coord.close()
 * ```
 */
export function memoryCoordination(opts: MemoryCoordinationOptions = {}): Coordination {
  const hub = opts.hub ?? memoryHub({ clock: opts.clock })
  const clock = hub.clock
  const instanceId = opts.instanceId ?? `mem-${randomUUID()}`
  if (hub.instances.get(instanceId)?.closedAt === null)
    throw new Error(`coordination: instance ${instanceId} is already open`)
  hub.instances.set(instanceId, { closedAt: null, leaseMs: opts.leaseMs ?? 30_000 })
  let closed = false
  const open = () => {
    if (closed) throw new Error('coordination: this instance is closed')
  }

  const liveSlots = (key: string) => {
    const held = hub.slots.get(key)
    if (!held) return undefined
    const now = clock.now()
    for (const [holder, exp] of held) if (exp <= now) held.delete(holder)
    if (held.size === 0) hub.slots.delete(key)
    return held.size ? held : undefined
  }
  let sweepAt = 1024
  const liveOnce = (key: string) => {
    const e = hub.once.get(key)
    if (e && e.expiresAt <= clock.now()) hub.once.delete(key)
    return hub.once.get(key)
  }

  const since = clock.now()
  return {
    driver: 'memory',
    instanceId,
    // One process: the backend is always there and the lease always held.
    state: () => ({ reachable: true, leased: true, since }),
    onStateChange: () => () => {},
    queue(name) {
      open()
      return memoryQueue(hub, instanceId, name)
    },
    slots: {
      async acquire(key, limit, holder, ttlMs) {
        open()
        const held = liveSlots(key) ?? new Map<string, number>()
        if (!held.has(holder) && held.size >= limit) return null
        const lease: SlotLease = { key, holder, expiresAt: clock.now() + ttlMs }
        held.set(holder, lease.expiresAt)
        hub.slots.set(key, held)
        return lease
      },
      async renew(lease, ttlMs) {
        const held = liveSlots(lease.key)
        if (!held?.has(lease.holder)) return null
        const expiresAt = clock.now() + ttlMs
        held.set(lease.holder, expiresAt)
        return { ...lease, expiresAt }
      },
      async release({ key, holder }) {
        const held = liveSlots(key)
        held?.delete(holder)
        if (held?.size === 0) hub.slots.delete(key)
      },
      async count(key) {
        return liveSlots(key)?.size ?? 0
      },
      async holders(key) {
        return [...(liveSlots(key)?.keys() ?? [])]
      },
    },
    rates: {
      async take(key, settings) {
        checkRateSettings(settings)
        const { burst, rpm } = settings
        const perMs = rpm / 60_000
        const now = clock.now()
        let b = hub.buckets.get(key)
        if (!b) {
          if (hub.buckets.size >= MAX_BUCKETS)
            for (const [k, x] of hub.buckets) if (x.tokens + (now - x.at) * perMs >= burst) hub.buckets.delete(k)
          b = { tokens: burst, at: now }
          hub.buckets.set(key, b)
        } else {
          b.tokens = Math.min(burst, b.tokens + Math.max(0, now - b.at) * perMs)
          b.at = now
        }
        const allowed = b.tokens >= 1
        if (allowed) b.tokens -= 1
        return rateDecision(b.tokens, allowed, settings)
      },
    },
    once: {
      async claimOnce(key, ttlMs) {
        return (await this.setIfAbsent(key, '1', ttlMs)) === null
      },
      async setIfAbsent(key, value, ttlMs) {
        open()
        const e = liveOnce(key)
        if (e) return e.value
        hub.once.set(key, { value, expiresAt: clock.now() + ttlMs })
        if (hub.once.size >= sweepAt) {
          // Expired keys are dropped when read; sweep the rest now and then (memory bound).
          for (const k of hub.once.keys()) liveOnce(k)
          sweepAt = Math.max(1024, hub.once.size * 2)
        }
        return null
      },
      async get(key) {
        return liveOnce(key)?.value ?? null
      },
      async delete(key) {
        hub.once.delete(key)
      },
    },
    pubsub: {
      async publish(channel, message) {
        open()
        const text = JSON.stringify(message)
        for (const sub of hub.channels.get(channel) ?? []) {
          // Microtasks run in the order queued: each subscriber sees publish order.
          queueMicrotask(() => {
            if (!hub.channels.get(channel)?.has(sub)) return
            try {
              sub.handler(JSON.parse(text))
            } catch {
              // A subscriber's error stays with it.
            }
          })
        }
      },
      async subscribe(channel, handler) {
        open()
        const sub: MemorySubscriber = { instance: instanceId, handler: handler as (m: unknown) => void }
        let set = hub.channels.get(channel)
        if (!set) {
          set = new Set()
          hub.channels.set(channel, set)
        }
        set.add(sub)
        return async () => {
          set.delete(sub)
          if (set.size === 0 && hub.channels.get(channel) === set) hub.channels.delete(channel)
        }
      },
    },
    delayed: {
      async schedule(queue, id, runAt, payload) {
        open()
        checkQueueName(queue)
        let jobs = hub.delayed.get(queue)
        if (!jobs) {
          jobs = new Map()
          hub.delayed.set(queue, jobs)
        }
        if (!jobs.has(id)) jobs.set(id, { runAt, payload: JSON.stringify(payload) })
        armDelayed(hub)
      },
      async cancel(queue, id) {
        return hub.delayed.get(queue)?.delete(id) ?? false
      },
      async process(queue, handler) {
        open()
        checkQueueName(queue)
        const proc = { instance: instanceId, handler: handler as never }
        hub.processors.set(queue, [...(hub.processors.get(queue) ?? []), proc])
        armDelayed(hub)
        return async () => {
          hub.processors.set(
            queue,
            (hub.processors.get(queue) ?? []).filter((p) => p !== proc),
          )
        }
      },
    },
    instances: {
      async alive() {
        return [...hub.instances].filter(([, i]) => i.closedAt === null).map(([id]) => id)
      },
    },
    async close() {
      if (closed) return
      closed = true
      hub.instances.get(instanceId)!.closedAt = clock.now()
      for (const [channel, set] of hub.channels) {
        for (const sub of set) if (sub.instance === instanceId) set.delete(sub)
        if (set.size === 0) hub.channels.delete(channel)
      }
      for (const [queue, procs] of hub.processors)
        hub.processors.set(
          queue,
          procs.filter((p) => p.instance !== instanceId),
        )
      armDelayed(hub)
    },
  }
}
