/**
 * Several Berth instances in this process, as several machines would run them: each with its
 * own HTTP server, data dir and store connection, all on one store and one coordination
 * backend (a `memoryHub`, or a real redis-server with the redis store and driver). With
 * `local`, each instance drives its own `local` runtime (host processes, the real runner and
 * the offline model), for tasks that run; with `engine`, a pool of its own on Docker or Podman.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { createStorage } from 'unstorage'
import { localRuntime } from '@berth/adapter-local'
import { memoryCoordination, memoryHub, silentLogger, type Coordination, type Store } from '@berth/core'
import {
  createBerth,
  createCoordination,
  redisStore,
  unstorageStore,
  type Berth,
  type BerthOptions,
} from '@berth/server'
import type { BerthClient } from '@berth/client'
import type { LocalRedis } from '@berth/testkit'
import { ADMIN_TOKEN, clientFor } from './helpers.js'
import { engineRuntime, onEngine, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

export { ADMIN_TOKEN }
export type Backend = 'memory' | 'redis'

export interface ClusterOptions {
  /** How many instances; with `local`, one per entry of `local.maxes`. */
  count?: number
  /** The redis-server of the `redis` backend. */
  redis?: LocalRedis
  /** The coordination's job lease (ms): a dead instance's work is taken over after it. */
  leaseMs?: number
  /** Each instance runs tasks on its own `local` runtime: `maxes[i]` is instance i's pool max. */
  local?: { maxes: number[]; sandbox: 'bwrap' | 'none' }
  /** Each instance runs tasks on the engine, with a pool of its own: `maxes[i]` is instance i's pool max. */
  engine?: { name: 'docker' | 'podman'; maxes: number[] }
  /** Options every instance is created with, on top of the cluster's. */
  berth?: Partial<BerthOptions>
  /** The redis backend: each instance's own Redis address (a proxy a test can sever) instead of `redis.path`. */
  redisUrl?: (instance: number) => string
  /** The redis backend: each instance's store (e.g. on one Postgres) instead of the redis store. */
  store?: () => Promise<Store>
  /** Options of each instance's redis coordination (the call bound). */
  coordination?: { commandTimeoutMs?: number }
  /** Slow the answers to reads of single-use records (see `slowSingleUseReads`). */
  slowSingleUse?: boolean
}

export interface Instance {
  url: string
  berth: Berth
  coordination: Coordination
  /** The typed client of this instance as `token`. */
  client(token?: string): BerthClient
  /** fetch against this instance, for what the client cannot send or must not parse. */
  request(path: string, init?: RequestInit & { token?: string | null; json?: unknown }): Promise<Response>
  /** Stop this instance (and remove what its runtime left); the others keep running. */
  close(): Promise<void>
}

export interface Cluster {
  instances: Instance[]
  /** A user (made through the admin API of the first instance) and its key. */
  user(name?: string): Promise<{ token: string; id: string }>
  close(): Promise<void>
}

let n = 0

/**
 * The store as a slow network hop would make it: the answers to reads of the single-use
 * records (OAuth states, WebSocket request ids) take `ms` to arrive, so two instances using one at once overlap
 * every time, as they can under load, instead of one finishing before the other starts.
 */
function slowSingleUseReads(store: Store, ms: number): Store {
  const slow = ['oauth-states:', 'ws-requests:']
  return new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown
      if (prop === 'get') {
        return async (key: string) => {
          // The answer travels back slowly: what was read may have changed by the time it arrives.
          const value = await target.get(key)
          // Real time is the point: the delay makes two reads overlap.
          if (slow.some((p) => key.startsWith(p))) await new Promise((r) => setTimeout(r, ms))
          return value
        }
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
}

/**
 * Start the instances of one cluster on `backend`; `close()` stops them all, in reverse order.
 *
 * @example
 * ```ts
 * const c = await startCluster('redis', { redis, local: { maxes: [0, 2], sandbox: 'bwrap' } })
 * ```
 */
export async function startCluster(backend: Backend, opts: ClusterOptions): Promise<Cluster> {
  const run = `${process.pid}-${++n}-${randomBytes(3).toString('hex')}`
  const hub = memoryHub()
  const shared = unstorageStore(createStorage())
  // One key for the deployment, as operators set BERTH_ENCRYPTION_KEY on every instance.
  const encryptionKey = randomBytes(32).toString('base64')
  const count = opts.local?.maxes.length ?? opts.engine?.maxes.length ?? opts.count ?? 1
  const instances: Instance[] = []
  const closers: (() => Promise<void>)[] = []
  const redis = () => {
    if (!opts.redis) throw new Error('the redis backend needs opts.redis')
    return opts.redis
  }
  try {
    for (let i = 0; i < count; i++) {
      const instanceId = `inst-${i}-${run}`
      const leaseMs = opts.leaseMs
      const coordination =
        backend === 'memory'
          ? memoryCoordination({ hub, instanceId, leaseMs })
          : await createCoordination({
              driver: 'redis',
              url: opts.redisUrl?.(i) ?? redis().path,
              prefix: `c-${run}:`,
              instanceId,
              leaseMs,
              ...opts.coordination,
            })
      const store =
        backend === 'memory'
          ? shared
          : opts.store
            ? await opts.store()
            : redisStore({ client: redis().connect(), prefix: `s-${run}:` })
      const dataDir = mkdtempSync(join(tmpdir(), 'berth-cluster-'))
      const cleanups: (() => Promise<void> | void)[] = [() => rmSync(dataDir, { recursive: true, force: true })]
      let runtime: Partial<BerthOptions> = { runtime: false }
      if (opts.local) {
        const baseDir = mkdtempSync(join(tmpdir(), 'berth-cluster-local-'))
        const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: opts.local.sandbox })
        const pool = uniquePoolName(`cluster-${i}`)
        runtime = {
          runtime: rt,
          pool: { image: 'local', min: 0, max: opts.local.maxes[i]!, name: pool },
          runner: { bundleDir: RUNNER_BUNDLE },
        }
        cleanups.push(async () => {
          await Promise.all((await onEngine(rt, pool)).map((c) => rt.remove(c.id)))
          rmSync(baseDir, { recursive: true, force: true })
        })
      } else if (opts.engine) {
        const { info, runtime: rt } = engineRuntime(opts.engine.name)
        const pool = uniquePoolName(`cluster-${opts.engine.name}-${i}`)
        runtime = {
          runtime: rt,
          pool: { image: info.image, min: 0, max: opts.engine.maxes[i]!, name: pool, spec: { network: 'none' } },
          runner: { bundleDir: RUNNER_BUNDLE },
        }
        cleanups.push(async () => void (await sweep(rt, pool)))
      }
      const berth = createBerth({
        store: opts.slowSingleUse ? slowSingleUseReads(store, 150) : store,
        ...runtime,
        coordination,
        dataDir,
        encryptionKey,
        adminToken: ADMIN_TOKEN,
        logger: silentLogger,
        validateResponses: true,
        rateLimit: { rpm: 100_000, burst: 10_000 },
        allowPrivateWebhooks: true,
        ...opts.berth,
      })
      const server: Server = createServer(berth.handler)
      server.on('upgrade', berth.handleUpgrade)
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      let closed = false
      const close = async () => {
        if (closed) return
        closed = true
        server.closeAllConnections()
        await berth.close({ removeContainers: true })
        await new Promise<void>((r) => server.close(() => r()))
        // A test may have closed it already, to play a dead instance.
        await coordination.close().catch(() => {})
        for (const c of cleanups) await c()
      }
      closers.unshift(close)
      await berth.ready
      const instance: Instance = {
        url,
        berth,
        coordination,
        client: (token) => clientFor(instance, token),
        request(path, init = {}) {
          const { token, json, ...rest } = init
          const headers = new Headers(rest.headers)
          if (token) headers.set('authorization', `Bearer ${token}`)
          if (json !== undefined) headers.set('content-type', 'application/json')
          return fetch(url + path, { ...rest, headers, body: json === undefined ? rest.body : JSON.stringify(json) })
        },
        close,
      }
      instances.push(instance)
    }
  } catch (err) {
    for (const c of closers) await c()
    throw err
  }
  return {
    instances,
    async user(name = 'Cluster user') {
      const made = await instances[0]!.client(ADMIN_TOKEN).admin.users.create({ body: { name, role: 'user' } })
      return { token: made.key.token, id: made.user.id }
    },
    async close() {
      for (const c of closers) await c()
    },
  }
}

/** A user of the cluster with a stub credential and a Bash profile, made on the first instance (the store is shared). */
export async function agentUser(
  cluster: Cluster,
  name = 'Agent user',
): Promise<{ token: string; id: string; profileId: string }> {
  const user = await cluster.user(name)
  const api = cluster.instances[0]!.client(user.token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'] },
  })
  return { ...user, profileId: profile.id }
}
