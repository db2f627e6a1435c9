import type { IndexEntry, IndexQuery } from '@berth/core'
import type { Redis } from 'ioredis'
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

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /** `redis://…` URL; or `path` (a unix socket), or `client`. */
  url?: string
  path?: string
  /** An ioredis client (the store closes it on `close()` only when it created it). */
  client?: Redis
  /** Key prefix (default `berth:`), so several deployments can share one Redis. */
  prefix?: string
}

/**
 * A store in Redis (for several Berth instances sharing one store): values as strings,
 * each list a sorted set read by rank (`ZREVRANGE`, `ZCARD`), every key in one sorted set
 * for prefix reads by range. Needs the optional `ioredis` package. One Redis (or a primary
 * with replicas); not Redis Cluster, whose slots would split a record from its index.
 *
 * @example
 * ```ts
 * const store = await redisStore({ url: 'redis://127.0.0.1:6379/0' })
 * await store.list('tasks:usr_1', { offset: 0, limit: 20 })
 * await store.close()
 * ```
 */
export async function redisStore(opts: RedisStoreOptions): Promise<ClosableStore> {
  const own = !opts.client
  let client = opts.client
  if (!client) {
    const { Redis: Client } = await import('ioredis')
    const options = { maxRetriesPerRequest: 3 }
    client = opts.path ? new Client({ ...options, path: opts.path }) : new Client(opts.url ?? 'redis://127.0.0.1:6379', options)
  }
  const redis = client
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

  return {
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
      const end = prefix ? `(${prefix.slice(0, -1)}${String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)}` : '+'
      return redis.zrangebylex(`${p}k`, prefix ? `[${prefix}` : '-', end)
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      await write(key, text(key, value), entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const name = `${p}i:${indexName(scope, query.term)}`
      const [[, total], [, members]] = (await redis
        .multi()
        .zcard(name)
        .zrevrange(name, query.offset, query.offset + Math.max(query.limit, 1) - 1)
        .exec()) as [[unknown, number], [unknown, string[]]]
      const ids = query.limit > 0 ? members.map((m) => `${scope}:${m.slice(m.lastIndexOf(SEP) + 1)}`) : []
      const items = (await mget<T>(ids)).filter((v): v is Awaited<T> => v !== null) as T[]
      return { items, total }
    },
    async close() {
      if (own) await redis.quit().catch(() => redis.disconnect())
    },
  }
}
