import { randomUUID } from 'node:crypto'
import { checkRateSettings, rateDecision, type Coordination, type SlotLease } from '@berth/core'
import type { ConnectionOptions } from 'bullmq'
import { Redis, type RedisOptions } from 'ioredis'
import { redisDelayed } from './redis-delayed.js'
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
  /** Told of background failures (lost connections, heartbeats, lock renewals); default: ignored. */
  onError?: (err: unknown) => void
}

/**
 * The redis coordination driver, for several Berth instances on one Redis: BullMQ for job
 * queues (priorities, stalled-job recovery, delayed retries) and delayed jobs; Lua scripts
 * on the server's clock for slot leases, rate buckets, put-if-absent and heartbeats; pub/sub
 * on a subscriber connection. Needs one Redis (or a primary), not Redis Cluster.
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
  const redisOptions: RedisOptions = { ...opts.redis }
  const client = opts.url ? new Redis(opts.url, redisOptions) : new Redis(redisOptions)
  client.on('error', onError) // ioredis reconnects; calls fail meanwhile
  // BullMQ opens its own connections with the options ioredis parsed; a worker's block
  // (BZPOPMIN), so they retry without limit.
  const connection = { ...client.options, maxRetriesPerRequest: null } as ConnectionOptions
  const scripts = coordinationScripts(client)
  const pubsub = redisPubSub(client, p, onError)
  const delayed = redisDelayed({ connection, bullPrefix: `${p}d`, leaseMs, onError })
  const queues = new Map<string, RedisQueue<unknown>>()
  const queueCtx = {
    connection,
    bullPrefix: `${p}q`,
    key: (kind: string, q: string) => `${p}${kind}:${q}`,
    scripts,
    instanceId,
    leaseMs,
    onError,
  }
  const instancesKey = `${p}instances`
  const slotKey = (key: string) => `${p}slot:${key}`
  const onceKey = (key: string) => `${p}once:${key}`

  const alive = async () => (await scripts.berthAlive([instancesKey])) as string[]
  if ((await alive()).includes(instanceId)) {
    await client.quit()
    throw new Error(`coordination: instance ${instanceId} is already alive on this Redis`)
  }
  const beat = async () => {
    await scripts.berthBeat([instancesKey], instanceId, leaseMs)
    await Promise.all([...queues.values()].map((q) => q.renewLeases()))
  }
  await beat()
  const timer = setInterval(() => void beat().catch(onError), Math.max(10, Math.floor(leaseMs / 3)))
  timer.unref()
  let closed = false

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
      return q as RedisQueue<P>
    },
    slots: {
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
    },
    rates: {
      async take(key, settings) {
        checkRateSettings(settings)
        const [allowed, tokens] = (await scripts.berthRateTake(
          [`${p}rate:${key}`],
          settings.burst,
          settings.rpm / 60_000,
        )) as [number, string]
        return rateDecision(Number(tokens), allowed === 1, settings)
      },
    },
    once: {
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
    },
    pubsub,
    delayed,
    instances: { alive },
    // Placeholder until outage handling lands: reachable while ioredis reports ready.
    state: () => ({ reachable: client.status === 'ready', leased: true, since: 0 }),
    onStateChange: () => () => {},
    async close() {
      if (closed) return
      closed = true
      clearInterval(timer)
      for (const q of queues.values()) await q.close()
      await delayed.close()
      await pubsub.close()
      await client.zrem(instancesKey, instanceId).catch(() => {})
      await client.quit().catch(() => {})
    },
  }
}
