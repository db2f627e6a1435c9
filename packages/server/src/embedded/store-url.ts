import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Store } from '@berth/core'
import { postgresStore } from '../storage/postgres.js'
import { redisStore } from '../storage/redis.js'
import { sqliteStore } from '../storage/sqlite.js'
import { redactUrl } from './storage-choice.js'

/** A store opened from a store URL, and how to describe it without a password. */
export interface OpenedStore {
  store: Store & { close(): Promise<void> }
  description: string
}

/** The URL without one query parameter, and that parameter's value. */
function take(url: string, name: string): [string, string | undefined] {
  const parsed = new URL(url)
  const value = parsed.searchParams.get(name) ?? undefined
  parsed.searchParams.delete(name)
  return [parsed.toString(), value]
}

/**
 * Open a store named by a URL: `sqlite:<path>` (relative to `cwd`; with `mustExist`, a
 * missing file is an error rather than a new empty store), `redis://…` or `rediss://…`
 * (`?prefix=` for a key prefix other than `berth:`), `postgres://…` or `postgresql://…`
 * (`?schema=` for a schema other than the connection's default; `caFile` for a private CA).
 *
 * @example
 * ```ts
 * const { store } = await openStoreUrl('sqlite:.data/berth.db', process.cwd(), { mustExist: true })
 * ```
 */
export async function openStoreUrl(
  url: string,
  cwd: string,
  opts: { mustExist?: boolean; caFile?: string | undefined } = {},
): Promise<OpenedStore> {
  if (url.startsWith('sqlite:')) {
    const path = resolve(cwd, url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, ''))
    if (opts.mustExist && !existsSync(path)) throw new Error(`${url}: there is no SQLite file at ${path}`)
    return { store: sqliteStore(path), description: `sqlite (${path})` }
  }
  if (/^rediss?:\/\//.test(url)) {
    const [clean, prefix] = take(url, 'prefix')
    const { Redis } = await import('ioredis')
    const client = new Redis(clean, { maxRetriesPerRequest: 3 })
    return { store: redisStore({ client, prefix: prefix ?? 'berth:' }), description: `redis (${redactUrl(url)})` }
  }
  if (/^postgres(ql)?:\/\//.test(url)) {
    const [clean, schema] = take(url, 'schema')
    return {
      store: await postgresStore(clean, { schema, caFile: opts.caFile }),
      description: `postgres (${redactUrl(url)})`,
    }
  }
  throw new Error(`unknown store URL "${redactUrl(url)}": use sqlite:<path>, redis://… or postgres://…`)
}
