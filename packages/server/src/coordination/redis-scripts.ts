import type { Redis } from 'ioredis'

// The atomic bits no library covers, each one Lua script (Redis runs a script alone, so
// concurrent instances see each other's effects whole). Time is the server's `TIME`, so the
// instances' clocks never have to agree.
const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`

/** Slot lease: KEYS[1] a sorted set holder → expiry ms. Returns the expiry, or -1 when full. */
const SLOT_ACQUIRE = `${NOW}
local key, limit, holder, ttl = KEYS[1], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if not redis.call('ZSCORE', key, holder) and redis.call('ZCARD', key) >= limit then return -1 end
redis.call('ZADD', key, now + ttl, holder)
if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
return now + ttl`

/** Extend a live lease: the new expiry, or -1 when it had lapsed or was released. */
const SLOT_RENEW = `${NOW}
local key, holder, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local exp = redis.call('ZSCORE', key, holder)
if not exp or tonumber(exp) <= now then return -1 end
redis.call('ZADD', key, now + ttl, holder)
if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
return now + ttl`

/** Live holders of a slot key. */
const SLOT_HOLDERS = `${NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')`

/**
 * Token bucket (core's `tokenBucket` arithmetic): KEYS[1] a hash of tokens `t` and time `a`.
 * Returns { allowed, tokens left as a string } (Lua numbers would be truncated to integers).
 */
const RATE_TAKE = `${NOW}
local key, burst, perMs = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local b = redis.call('HMGET', key, 't', 'a')
local tokens, at = tonumber(b[1]), tonumber(b[2])
if not tokens then tokens = burst at = now end
tokens = math.min(burst, tokens + math.max(0, now - at) * perMs)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1 allowed = 1 end
redis.call('HSET', key, 't', string.format('%.17g', tokens), 'a', now)
redis.call('PEXPIRE', key, math.ceil((burst - tokens) / perMs) + 1000)
return { allowed, string.format('%.17g', tokens) }`

/** Put-if-absent with a ttl: nil when stored, else the value already there. */
const SET_IF_ABSENT = `
local old = redis.call('GET', KEYS[1])
if old then return old end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`

/**
 * Heartbeat: KEYS[1] a sorted set instance → expiry ms, KEYS[2] the deployment's epoch
 * marker (written with ARGV[3] when missing: Redis lost its state). Returns the marker.
 */
const BEAT = `${NOW}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local epoch = redis.call('GET', KEYS[2])
if not epoch then redis.call('SET', KEYS[2], ARGV[3]) epoch = ARGV[3] end
return epoch`

/** Instances whose heartbeat has not lapsed. */
const ALIVE = `${NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')`

/**
 * Reserve a job id in a queue and count its owner's jobs there (for fairness): KEYS[1] a
 * hash id → owner, KEYS[2] a hash owner → jobs. Returns the owner's jobs before this one,
 * or -1 when the id is already in the queue.
 */
const JOB_ADMIT = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return -1 end
return redis.call('HINCRBY', KEYS[2], ARGV[2], 1) - 1`

/** Forget a job id that left its queue, and uncount it from its owner. Returns 1 when it was there. */
const JOB_FORGET = `
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if not owner then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[2], owner, -1) <= 0 then redis.call('HDEL', KEYS[2], owner) end
return 1`

const SCRIPTS = {
  berthSlotAcquire: SLOT_ACQUIRE,
  berthSlotRenew: SLOT_RENEW,
  berthSlotHolders: SLOT_HOLDERS,
  berthRateTake: RATE_TAKE,
  berthSetIfAbsent: SET_IF_ABSENT,
  berthBeat: BEAT,
  berthAlive: ALIVE,
  berthJobAdmit: JOB_ADMIT,
  berthJobForget: JOB_FORGET,
} as const

/** The scripts as methods of a client (ioredis `defineCommand`: EVALSHA, loading once). */
export type CoordinationScripts = {
  [K in keyof typeof SCRIPTS]: (keys: string[], ...args: (string | number)[]) => Promise<unknown>
}

/**
 * Define Berth's coordination scripts on an ioredis client (all take their keys first).
 *
 * @example
 * ```ts
 * const scripts = coordinationScripts(new Redis(url))
 * await scripts.berthSlotAcquire(['berth:slot:prof_1'], 5, 'ws_1', 60_000) // expiry ms, or -1
 * ```
 */
export function coordinationScripts(client: Redis): CoordinationScripts {
  const out: Record<string, CoordinationScripts[keyof CoordinationScripts]> = {}
  for (const [name, lua] of Object.entries(SCRIPTS) as [keyof typeof SCRIPTS, string][]) {
    client.defineCommand(name, { lua })
    const call = (client as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name]!.bind(client)
    out[name] = (keys: string[], ...args: (string | number)[]) => call(keys.length, ...keys, ...args)
  }
  return out as CoordinationScripts
}
