import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage, type Storage } from 'unstorage'
import { manualClock, type Logger } from '@berth/core'
import { createBerth, type Berth, type BerthOptions } from '@berth/server'
import { BerthError, createBerthClient, type BerthClient, type Task } from '@berth/client'
import { expect, vi } from 'vitest'

/** A JSON reply read without its schema, so that a test can reach into any field of it. */
// biome-ignore lint/suspicious/noExplicitAny: replies are read untyped here; `unknown` would need a cast at every field
export type Json = Record<string, any>

export const ADMIN_TOKEN = 'test-operator-token-0123456789'

export interface TestServer {
  url: string
  berth: Berth
  server: Server
  clock: ReturnType<typeof manualClock>
  logs: string[]
  /** fetch against the server with an optional bearer token. */
  request(path: string, init?: RequestInit & { token?: string | null; json?: unknown }): Promise<Response>
  /** Create a user (through the admin API) and return its bearer token and id. */
  user(name?: string, role?: 'user' | 'admin'): Promise<{ token: string; id: string }>
  close(): Promise<void>
}

/**
 * A real Berth on a real HTTP server on 127.0.0.1, a random port, memory storage by
 * default, a manual clock, responses checked against their schemas, logs captured.
 */
export async function startServer(opts: Partial<BerthOptions> & { storage?: Storage } = {}): Promise<TestServer> {
  const logs: string[] = []
  const clock = manualClock(Date.parse('2026-01-01T00:00:00Z'))
  const logger: Logger = {
    info: (msg, f) => logs.push(JSON.stringify({ level: 'info', msg, ...f })),
    warn: (msg, f) => logs.push(JSON.stringify({ level: 'warn', msg, ...f })),
    error: (msg, f) => logs.push(JSON.stringify({ level: 'error', msg, ...f })),
  }
  // A data dir the test did not choose is ours to remove on close.
  const ownDir = opts.dataDir ? undefined : mkdtempSync(join(tmpdir(), 'berth-test-'))
  const berth = createBerth({
    // No container runtime unless the test names one (the embedded default would choose one).
    runtime: false,
    storage: opts.storage ?? createStorage(),
    dataDir: opts.dataDir ?? ownDir,
    adminToken: ADMIN_TOKEN,
    clock,
    logger,
    validateResponses: true,
    // High limits so tests are not throttled unless they test the limiter.
    rateLimit: { rpm: 100_000, burst: 10_000 },
    ...opts,
  })
  const server = createServer(berth.handler)
  server.on('upgrade', berth.handleUpgrade)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const request: TestServer['request'] = (path, init = {}) => {
    const { token, json, ...rest } = init
    const headers = new Headers(rest.headers)
    if (token) headers.set('authorization', `Bearer ${token}`)
    if (json !== undefined) headers.set('content-type', 'application/json')
    return fetch(url + path, { ...rest, headers, body: json === undefined ? rest.body : JSON.stringify(json) })
  }
  return {
    url,
    berth,
    server,
    clock,
    logs,
    request,
    async user(name = 'Test user', role = 'user') {
      const res = await request('/admin/users', { method: 'POST', token: ADMIN_TOKEN, json: { name, role } })
      if (res.status !== 201) throw new Error(`creating a user failed: ${res.status} ${await res.text()}`)
      const body = (await res.json()) as { user: { id: string }; key: { token: string } }
      return { token: body.key.token, id: body.user.id }
    },
    async close() {
      server.closeAllConnections()
      // Berth first: it closes the WebSockets, which the HTTP server no longer tracks.
      // Tests leave nothing behind: pooled containers go too (a restart test keeps them itself).
      await berth.close({ removeContainers: true })
      await new Promise<void>((r) => server.close(() => r()))
      if (ownDir) rmSync(ownDir, { recursive: true, force: true })
    },
  }
}

/**
 * The typed client (`@berth/client`) of a test server or instance, as `token`. No retries
 * and no WebSocket: a test sees every answer the server gives, once. With `seen`, the text
 * of every answer is pushed there too (to scan for what must never be in a response).
 */
export function clientFor(target: { url: string }, token?: string, seen?: string[]): BerthClient {
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    seen?.push(await res.clone().text())
    return res
  }
  return createBerthClient({
    baseURL: target.url,
    token,
    retry: false,
    websocket: false,
    fetch: seen ? recording : undefined,
  })
}

/** The rejection of a client call, asserted to be a `BerthError` (its status, code, details, headers). */
export async function failure(call: Promise<unknown>): Promise<BerthError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(BerthError)
  return err as BerthError
}

/** The statuses a task ends in. */
export const ENDED: readonly string[] = ['completed', 'failed', 'cancelled']

/**
 * Read the task through `api` until `until` holds (default: it has ended) and resolve with
 * that view of it. A failed read (a 429 from a rate-limited server) is asked again.
 */
export function waitForTask(
  api: BerthClient,
  taskId: string,
  opts: { until?: (t: Task) => boolean; timeout?: number; interval?: number } = {},
): Promise<Task> {
  const until = opts.until ?? ((t: Task) => ENDED.includes(t.status))
  return vi.waitFor(
    async () => {
      const t = await api.tasks.get({ params: { id: taskId } })
      expect(until(t), `task ${taskId} is ${t.status}`).toBe(true)
      return t
    },
    { timeout: opts.timeout ?? 90_000, interval: opts.interval ?? 50 },
  )
}
