import { randomUUID } from 'node:crypto'
import { checkRateSettings, rateDecision, type Coordination, type SlotLease } from '@berth/core'
import type { ConnectionOptions } from 'bullmq'
import { Redis, type RedisOptions } from 'ioredis'
import { redisDelayed } from './redis-delayed.js'
import { bounded, boundedMethods, redisHealth, withTimeout } from './redis-health.js'
import { redisPubSub } from './redis-pubsub.js'
import { redisQueue, type RedisQueue } from './redis-queue.js'
import { coordinationScripts } from './redis-scripts.js'

/** Options of {@link redisCoordination}. */
export interface RedisCoordinationOptions {
  /** `redis://…`, `rediss://…` or a unix socket path (ioredis' forms). */
  url?: string
  /** ioredis options, instead of or on top of `url`. */
  redis?: RedisOptions
  /** Prefix of every key and channel (default `berth:`), so deployments and tests can share a server. */
  prefix?: string
  /** This instance's id (default: a random one). */
  instanceId?: string
  /**
   * Lease of the jobs an instance holds and of its heartbeat (default 30 s): a dead
   * instance's jobs are handed out again within about two leases. Renewed every third of it.
   */
  leaseMs?: number
  /**
   * How long any call may take before it rejects with `CoordinationUnavailableError`
   * (default 3 s); while Redis is known to be unreachable calls reject at once.
   */
  commandTimeoutMs?: number
  /**
   * How long before its heartbeat lease would lapse this instance counts itself unleased and
   * stops driving its tasks (default a fifth of `leaseMs`).
   */
  leaseMarginMs?: number
  /** Told of background failures (Redis lost, once per outage; lock renewals; handlers); default: ignored. */
  onError?: (err: unknown) => void
}

/**
 * The redis coordination driver, for several Berth instances on one Redis: BullMQ for job
 * queues (priorities, stalled-job recovery, delayed retries) and delayed jobs; Lua scripts
 * on the server's clock for slot leases, rate buckets, put-if-absent and heartbeats; pub/sub
 * on a subscriber connection. Needs one Redis (or a primary), not Redis Cluster. While
 * Redis is away every call rejects within `commandTimeoutMs` with
 * `CoordinationUnavailableError`; `state()` tells reachability and the heartbeat lease, and
 * `onStateChange` a return with `reset` when Redis lost the deployment's `epoch` marker.
 *
 * @example
 * ```ts
 * const coord = await redisCoordination({ url: 'redis://127.0.0.1:6379/0' })
 * const ok = (await coord.rates.take('usr_1', { rpm: 60, burst: 10 })).allowed
 * await coord.close()
 * ```
 */
export async function redisCoordination(opts: RedisCoordinationOptions = {}): Promise<Coordination> {
  const p = opts.prefix ?? 'berth:'
  const leaseMs = opts.leaseMs ?? 30_000
  const instanceId = opts.instanceId ?? `${process.pid}-${randomUUID()}`
  const onError = opts.onError ?? (() => {})
  const timeoutMs = opts.commandTimeoutMs ?? 3_000
  const health = redisHealth({ leaseMs, marginMs: opts.leaseMarginMs ?? Math.floor(leaseMs / 5), onError })
  let closed = false
  const down = (err: unknown) => {
    if (!closed) health.down(err)
  }
  const call = <T>(fn: () => Promise<T>) => bounded(health, timeoutMs, fn)
  // Calls fail fast while Redis is away (no offline queue) or slow (the timeout); ioredis
  // reconnects on its own meanwhile.
  const redisOptions: RedisOptions = {
    maxRetriesPerRequest: 1,
    commandTimeout: timeoutMs,
    ...opts.redis,
    enableOfflineQueue: false,
    lazyConnect: true,
  }
  const client = opts.url ? new Redis(opts.url, redisOptions) : new Redis(redisOptions)
  client.on('error', down).on('close', () => down(new Error('Connection is closed.')))
  await client.connect()
  // BullMQ opens its own connections with the options ioredis parsed; a worker's block
  // (BZPOPMIN), so they retry without limit and queue commands offline: `bounded` limits
  // how long a caller waits for them.
  const connection = {
    ...client.options,
    lazyConnect: false,
    enableOfflineQueue: true,
    commandTimeout: undefined,
    maxRetriesPerRequest: null,
  } as ConnectionOptions
  const scripts = coordinationScripts(client)
  const pubsubDriver = redisPubSub(client, p, down)
  const delayedDriver = redisDelayed({ connection, bullPrefix: `${p}d`, leaseMs, onError, onConnectionError: down })
  const queues = new Map<string, RedisQueue<unknown>>()
  const queueCtx = {
    connection,
    bullPrefix: `${p}q`,
    key: (kind: string, q: string) => `${p}${kind}:${q}`,
    scripts,
    instanceId,
    leaseMs,
    onError: down,
  }
  const instancesKey = `${p}instances`
  const epochKey = `${p}epoch`
  const slotKey = (key: string) => `${p}slot:${key}`
  const onceKey = (key: string) => `${p}once:${key}`

  const alive = async () => (await scripts.berthAlive([instancesKey])) as string[]
  if ((await alive()).includes(instanceId)) {
    await client.quit()
    throw new Error(`coordination: instance ${instanceId} is already alive on this Redis`)
  }
  // The deployment's epoch: a marker every heartbeat reads (and writes when missing). A
  // different or missing one means Redis came back without this deployment's state; the
  // beat that finds it re-registers this instance too.
  let epoch: string | undefined
  let beating: Promise<void> | null = null
  const beatOnce = async () => {
    const sentAt = Date.now()
    const seen = (await withTimeout(timeoutMs, () =>
      scripts.berthBeat([instancesKey, epochKey], instanceId, leaseMs, randomUUID()),
    )) as string
    const reset = epoch !== undefined && seen !== epoch
    epoch = seen
    health.beat(sentAt, reset)
    await Promise.all([...queues.values()].map((q) => q.renewLeases()))
  }
  const beat = () => {
    beating ??= beatOnce()
      .catch(down)
      .finally(() => {
        beating = null
      })
    return beating
  }
  // The first beat may not wait for `reachable` (nothing has succeeded yet).
  const sentAt = Date.now()
  epoch = (await scripts.berthBeat([instancesKey, epochKey], instanceId, leaseMs, randomUUID())) as string
  health.beat(sentAt, false)
  const timer = setInterval(
    () => {
      if (client.status === 'ready') void beat()
    },
    Math.max(10, Math.floor(leaseMs / 3)),
  )
  timer.unref()
  // Back after an outage: beat at once (reachable, leased again, and whether Redis was reset).
  client.on('ready', () => {
    if (!closed) void beat()
  })

  const slots: Coordination['slots'] = {
    async acquire(key, limit, holder, ttlMs) {
      const exp = (await scripts.berthSlotAcquire([slotKey(key)], limit, holder, ttlMs)) as number
      return exp < 0 ? null : { key, holder, expiresAt: exp }
    },
    async renew(lease, ttlMs): Promise<SlotLease | null> {
      const exp = (await scripts.berthSlotRenew([slotKey(lease.key)], lease.holder, ttlMs)) as number
      return exp < 0 ? null : { ...lease, expiresAt: exp }
    },
    async release({ key, holder }) {
      await client.zrem(slotKey(key), holder)
    },
    async count(key) {
      return ((await scripts.berthSlotHolders([slotKey(key)])) as string[]).length
    },
    async holders(key) {
      return (await scripts.berthSlotHolders([slotKey(key)])) as string[]
    },
  }
  const rates: Coordination['rates'] = {
    async take(key, settings) {
      checkRateSettings(settings)
      const [allowed, tokens] = (await scripts.berthRateTake(
        [`${p}rate:${key}`],
        settings.burst,
        settings.rpm / 60_000,
      )) as [number, string]
      return rateDecision(Number(tokens), allowed === 1, settings)
    },
  }
  const once: Coordination['once'] = {
    async claimOnce(key, ttlMs) {
      return (await client.set(onceKey(key), '1', 'PX', ttlMs, 'NX')) === 'OK'
    },
    async setIfAbsent(key, value, ttlMs) {
      return (await scripts.berthSetIfAbsent([onceKey(key)], value, ttlMs)) as string | null
    },
    get: (key) => client.get(onceKey(key)),
    async delete(key) {
      await client.del(onceKey(key))
    },
  }

  return {
    driver: 'redis',
    instanceId,
    queue<P>(name: string) {
      if (closed) throw new Error('coordination: this instance is closed')
      let q = queues.get(name)
      if (!q) {
        q = redisQueue(queueCtx, name)
        queues.set(name, q)
      }
      return boundedMethods(q as RedisQueue<P>, ['add', 'take', 'ack', 'fail', 'cancel', 'counts'], call)
    },
    slots: boundedMethods(slots, ['acquire', 'renew', 'release', 'count', 'holders'], call),
    rates: boundedMethods(rates, ['take'], call),
    once: boundedMethods(once, ['claimOnce', 'setIfAbsent', 'get', 'delete'], call),
    pubsub: boundedMethods(pubsubDriver, ['publish', 'subscribe'], call),
    delayed: boundedMethods(delayedDriver, ['schedule', 'cancel', 'process'], call),
    instances: { alive: () => call(alive) },
    state: health.state,
    onStateChange: health.onStateChange,
    async close() {
      if (closed) return
      closed = true
      health.close()
      clearInterval(timer)
      // Redis may be away: each part gets the call bound, then its connections are dropped.
      const closing = async (close: () => Promise<unknown>, drop: () => Promise<unknown>) => {
        await withTimeout(timeoutMs, close).catch(() => drop().catch(() => {}))
      }
      for (const q of queues.values()) await closing(q.close, q.disconnect)
      await closing(delayedDriver.close, delayedDriver.disconnect)
      await closing(pubsubDriver.close, pubsubDriver.disconnect)
      await withTimeout(timeoutMs, () => client.zrem(instancesKey, instanceId)).catch(() => {})
      await client.quit().catch(() => {})
      client.disconnect()
    },
  }
}
