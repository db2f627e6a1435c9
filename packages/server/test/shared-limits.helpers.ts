/**
 * Several Berth instances in this process, as several machines would run them: each with its
 * own HTTP server, data dir and store connection, all on one store and one coordination
 * backend (a `memoryHub`, or a real redis-server with the redis store and driver).
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
import { createBerth, createCoordination, redisStore, unstorageStore, type Berth, type BerthOptions } from '@berth/server'
import type { LocalRedis } from '@berth/testkit'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import type { Json } from './helpers.js'

export const ADMIN_TOKEN = 'shared-operator-token-0123456789'
export type Backend = 'memory' | 'redis'
export type { Json }

export interface Instance {
  url: string
  berth: Berth
  coordination: Coordination
  request(path: string, init?: RequestInit & { token?: string | null; json?: unknown }): Promise<Response>
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
          if (slow.some((p) => key.startsWith(p))) await new Promise((r) => setTimeout(r, ms))
          return value
        }
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  })
}

/**
 * `count` instances on one store and one coordination backend. `local`: each drives its own
 * `local` runtime (host processes, the real runner and the offline model), for tasks that run.
 */
export async function startCluster(
  backend: Backend,
  opts: { count: number; redis?: LocalRedis; berth?: Partial<BerthOptions>; local?: boolean; slowSingleUse?: boolean },
): Promise<Cluster> {
  const run = `${process.pid}-${++n}-${randomBytes(3).toString('hex')}`
  const hub = memoryHub()
  const shared = unstorageStore(createStorage())
  // One key for the deployment, as operators set BERTH_ENCRYPTION_KEY on every instance.
  const encryptionKey = randomBytes(32).toString('base64')
  const instances: Instance[] = []
  const cleanups: (() => Promise<void> | void)[] = []
  try {
    for (let i = 0; i < opts.count; i++) {
      const instanceId = `inst-${i}-${run}`
      const coordination =
        backend === 'memory'
          ? memoryCoordination({ hub, instanceId })
          : await createCoordination({ driver: 'redis', url: opts.redis!.path, prefix: `c-${run}:`, instanceId })
      const dataDir = mkdtempSync(join(tmpdir(), 'berth-shared-'))
      const store = backend === 'memory' ? shared : redisStore({ client: opts.redis!.connect(), prefix: `s-${run}:` })
      let runtime: Partial<BerthOptions> = {}
      if (opts.local) {
        const baseDir = mkdtempSync(join(tmpdir(), 'berth-shared-local-'))
        const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'none' })
        const pool = uniquePoolName(`shared-${i}`)
        runtime = { runtime: rt, pool: { image: 'local', min: 0, max: 4, name: pool }, runner: { bundleDir: RUNNER_BUNDLE } }
        cleanups.push(async () => {
          for (const c of await onEngine(rt, pool)) await rt.remove(c.id)
          rmSync(baseDir, { recursive: true, force: true })
        })
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
      cleanups.unshift(async () => {
        server.closeAllConnections()
        await berth.close({ removeContainers: true })
        await new Promise<void>((r) => server.close(() => r()))
        await coordination.close()
        rmSync(dataDir, { recursive: true, force: true })
      })
      await berth.ready
      instances.push({
        url,
        berth,
        coordination,
        request(path, init = {}) {
          const { token, json, ...rest } = init
          const headers = new Headers(rest.headers)
          if (token) headers.set('authorization', `Bearer ${token}`)
          if (json !== undefined) headers.set('content-type', 'application/json')
          return fetch(url + path, { ...rest, headers, ...(json !== undefined && { body: JSON.stringify(json) }) })
        },
      })
    }
  } catch (err) {
    for (const c of cleanups) await c()
    throw err
  }
  return {
    instances,
    async user(name = 'Shared user') {
      const res = await instances[0]!.request('/admin/users', { method: 'POST', token: ADMIN_TOKEN, json: { name, role: 'user' } })
      if (res.status !== 201) throw new Error(`creating a user failed: ${res.status} ${await res.text()}`)
      const body = (await res.json()) as { user: { id: string }; key: { token: string } }
      return { token: body.key.token, id: body.user.id }
    },
    async close() {
      for (const c of cleanups) await c()
    },
  }
}
