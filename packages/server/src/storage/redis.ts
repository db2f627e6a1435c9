import type { IndexEntry, IndexQuery, StoredEntry } from '@berth/core'
import { entryFromNames } from './entries.js'
import { indexNames, indexName, SEP, idOf } from './ordered-index.js'
import type { ClosableStore } from './sqlite.js'

// Each write is one Lua script: Redis runs it atomically, so a client that dies mid-write
// leaves the record and its index entries either both changed or both as they were.
// Layout under the prefix: `v:<key>` value, `e:<key>` index entry ({ names, member }),
// `i:<index>` a sorted set (all scores 0, members `order␟id` in byte order), `k` every key.
const WRITE = `
local p, key, value, entry = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old = redis.call('GET', p .. 'e:' .. key)
if old ~= entry then
  if old then
    local o = cjson.decode(old)
    for _, n in ipairs(o.names) do redis.call('ZREM', p .. 'i:' .. n, o.member) end
  end
  if entry ~= '' then
    local e = cjson.decode(entry)
    for _, n in ipairs(e.names) do redis.call('ZADD', p .. 'i:' .. n, 0, e.member) end
    redis.call('SET', p .. 'e:' .. key, entry)
  else
    redis.call('DEL', p .. 'e:' .. key)
  end
end
if value == '' then
  redis.call('DEL', p .. 'v:' .. key)
  redis.call('ZREM', p .. 'k', key)
else
  redis.call('SET', p .. 'v:' .. key, value)
  redis.call('ZADD', p .. 'k', 0, key)
end
return 1`

// One page of one index, its count and the page's values, read atomically in one round trip.
// With `after` (ARGV[6] non-empty) the page is a lexical range below it (members are
// `order␟id`, all scores 0): O(log n + limit) whatever the depth.
const LIST = `
local p, name, scope, offset, limit, after = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local total = redis.call('ZCARD', p .. 'i:' .. name)
local values = {}
if limit > 0 and offset < total then
  local members
  if after ~= '' then
    members = redis.call('ZREVRANGEBYLEX', p .. 'i:' .. name, '(' .. after, '-', 'LIMIT', offset, limit)
  else
    members = redis.call('ZREVRANGE', p .. 'i:' .. name, offset, offset + limit - 1)
  end
  for i, m in ipairs(members) do
    local id = string.match(m, '\\031([^\\031]*)$')
    values[i] = redis.call('GET', p .. 'v:' .. scope .. ':' .. id) or ''
  end
end
return { total, values }`

/** What the store needs of a Redis client: an `ioredis` instance fits. */
export interface RedisClient {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
  get(key: string): Promise<string | null>
  mget(keys: string[]): Promise<(string | null)[]>
  zrangebylex(key: string, min: string, max: string): Promise<string[]>
  quit(): Promise<unknown>
}

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /** A connected client, e.g. `new Redis(url)` of the optional `ioredis` package. */
  client: RedisClient
  /** Key prefix (default `berth:`), so several deployments can share one Redis. */
  prefix?: string
  /** Quit the client on `close()` (default true). */
  closeClient?: boolean
}

/**
 * A store in Redis (for several Berth instances sharing one store): values as strings,
 * each list a sorted set read by rank (`ZCARD`, `ZREVRANGE`) in one Lua script, every key
 * in one sorted set for prefix reads by range. One Redis (or a primary with replicas); not
 * Redis Cluster, whose slots would split a record from its index.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis'
 * const store = redisStore({ client: new Redis('redis://127.0.0.1:6379/0') })
 * await store.list('tasks:usr_1', { offset: 0, limit: 20 })
 * await store.close()
 * ```
 */
export function redisStore(opts: RedisStoreOptions): ClosableStore & { entries(): AsyncIterable<StoredEntry> } {
  const redis = opts.client
  const p = opts.prefix ?? 'berth:'
  const write = async (key: string, value: string, entry: IndexEntry | null) => {
    const e = entry ? JSON.stringify({ names: indexNames(entry), member: `${entry.order}${SEP}${idOf(key)}` }) : ''
    await redis.eval(WRITE, 0, p, key, value, e)
  }
  const parse = <T>(v: string | null): T | null => (v === null ? null : (JSON.parse(v) as T))
  const text = (key: string, value: unknown) => {
    if (value === undefined) throw new TypeError(`store: undefined value for ${key}`)
    return JSON.stringify(value)
  }
  const mget = async <T>(keys: string[]): Promise<(T | null)[]> =>
    keys.length === 0 ? [] : (await redis.mget(keys.map((k) => `${p}v:${k}`))).map((v) => parse<T>(v))

  const self = {
    driver: 'redis',
    // One cheap round trip (a GET; the client interface has no PING).
    async ping() {
      await redis.get(`${p}v:`)
    },
    async get<T>(key: string) {
      return parse<T>(await redis.get(`${p}v:${key}`))
    },
    getMany: mget,
    async set<T>(key: string, value: T) {
      await write(key, text(key, value), null)
    },
    async remove(key: string) {
      await write(key, '', null)
    },
    async keys(prefix: string) {
      const end = prefix
        ? `(${prefix.slice(0, -1)}${String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)}`
        : '+'
      return redis.zrangebylex(`${p}k`, prefix ? `[${prefix}` : '-', end)
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      await write(key, text(key, value), entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const limit = Math.min(query.limit, 1_000_000_000)
      const [total, values] = (await redis.eval(
        LIST,
        0,
        p,
        indexName(scope, query.term),
        scope,
        query.offset,
        limit,
        query.after ?? '',
      )) as [number, string[]]
      return { items: values.filter((v) => v !== '').map((v) => JSON.parse(v) as T), total }
    },
    async *entries() {
      const keys = await self.keys('')
      for (let i = 0; i < keys.length; i += 500) {
        const batch = keys.slice(i, i + 500)
        const got = await redis.mget(batch.flatMap((k) => [`${p}v:${k}`, `${p}e:${k}`]))
        for (const [j, key] of batch.entries()) {
          const [value, entry] = [got[2 * j], got[2 * j + 1]]
          if (value === null || value === undefined) continue
          const e = entry ? (JSON.parse(entry) as { names: string[]; member: string }) : null
          yield {
            key,
            value: JSON.parse(value) as unknown,
            index: e && entryFromNames(e.names, e.member.slice(0, e.member.lastIndexOf(SEP))),
          }
        }
      }
    },
    async close() {
      if (opts.closeClient !== false) await redis.quit().catch(() => {})
    },
  }
  return self
}
