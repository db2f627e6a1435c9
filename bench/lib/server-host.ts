/**
 * A server under test, run as its own child process (forked by bench/lib/hosts.ts): either
 * Berth (memory or fs unstorage driver, seeded through its own HTTP API) or a bare
 * node:http server answering fixed bytes. One process per target keeps each server's heap,
 * JIT state and event loop to itself.
 *
 * Messages in: a {@link HostConfig}, then `measure-start`, `measure-end`, `close`.
 * Messages out: `ready` (port, request to send, response bytes), `cpu` (after
 * `measure-end`), `closed`, or `error`.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadPackageFile, loadWorkspace } from './workspace.js'
import { registerTracing } from './tracing.js'
import { seedProfile } from './seed.js'

export type HostKind = 'bare' | 'h3' | 'memory' | 'fs' | 'standalone'

export interface HostConfig {
  kind: HostKind
  /** For `bare` and `h3`: the bytes and content type to answer with (base64). */
  bodyBase64?: string
  contentType?: string
  /** Berth hosts: Prometheus metrics on (`createBerth({ metrics: true })`); default off. */
  metrics?: boolean
  /**
   * For `h3`: the paths to serve, each under its route pattern with its own bytes (default:
   * `/v1/profiles/:id` answering `bodyBase64` for any id).
   */
  routes?: { pattern: string; path: string; bodyBase64: string; contentType: string }[]
}

export interface HostReady {
  type: 'ready'
  port: number
  /** Human description of the storage behind the server. */
  storage: string
  /** Where the load goes, and with which headers (Berth: the bearer caller key). */
  path: string
  headers: Record<string, string>
  /** The response body a GET of `path` answered, and its content type. */
  bodyBase64: string
  contentType: string
  /** Where `@berth/server` was loaded from (Berth hosts). */
  serverDir?: string
}

export interface HostClosed {
  type: 'closed'
  /** Berth: `RateLimit-Remaining` after the run, and the bucket size (proof the limiter counted). */
  limiter?: { burst: number; remaining: number }
  /** The standalone server: bytes its request log file held at the end. */
  logBytes?: number
}

export const ADMIN_TOKEN = 'bench-operator-token-0123456789abcdef'
/**
 * The limiter runs on every request but refuses none: the bucket holds a billion tokens.
 * Its refill is slow on purpose, so the tokens left after a run show it counted each request.
 */
export const RATE_LIMIT = { rpm: 60, burst: 1_000_000_000 }

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  return (server.address() as AddressInfo).port
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((r) => server.close(() => r()))
}

interface Started {
  ready: HostReady
  close(): Promise<HostClosed>
}

async function startBare(cfg: HostConfig): Promise<Started> {
  const body = Buffer.from(cfg.bodyBase64 ?? '', 'base64')
  const contentType = cfg.contentType ?? 'application/json'
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': contentType, 'content-length': body.length })
    res.end(body)
  })
  const port = await listen(server)
  return {
    ready: {
      type: 'ready',
      port,
      storage: '—',
      path: '/',
      headers: {},
      bodyBase64: body.toString('base64'),
      contentType,
    },
    async close() {
      await closeServer(server)
      return { type: 'closed' }
    },
  }
}

/**
 * Bare h3, as Berth's `@berth/server` resolves it: one route with Berth's path pattern
 * (or each of `cfg.routes`) answering the same bytes, through the same `toNodeHandler` adapter. What h3 and the
 * adapter cost alone.
 */
async function startH3(cfg: HostConfig): Promise<Started> {
  type H3Module = {
    H3: new () => { get(path: string, handler: (event: { url: URL }) => Response): unknown }
    toNodeHandler(
      app: unknown,
    ): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void
  }
  const h3 = await loadPackageFile<H3Module>('h3', 'dist/_entries/node.mjs')
  const body = Buffer.from(cfg.bodyBase64 ?? '', 'base64')
  const contentType = cfg.contentType ?? 'application/json'
  const app = new h3.H3()
  if (cfg.routes) {
    // Several paths may share a pattern (two workspaces): the handler answers each path's bytes.
    const byPath = new Map(
      cfg.routes.map((r) => [r.path, { bytes: Buffer.from(r.bodyBase64, 'base64'), type: r.contentType }]),
    )
    for (const pattern of new Set(cfg.routes.map((r) => r.pattern))) {
      app.get(pattern, (event: { url: URL }) => {
        const r = byPath.get(event.url.pathname)!
        return new Response(r.bytes, { headers: { 'content-type': r.type } })
      })
    }
  } else app.get('/v1/profiles/:id', () => new Response(body, { headers: { 'content-type': contentType } }))
  const server = createServer(h3.toNodeHandler(app))
  const port = await listen(server)
  return {
    ready: {
      type: 'ready',
      port,
      storage: '—',
      path: '/',
      headers: {},
      bodyBase64: body.toString('base64'),
      contentType,
    },
    async close() {
      await closeServer(server)
      return { type: 'closed' }
    },
  }
}

async function startBerth(kind: 'memory' | 'fs', metrics = false): Promise<Started> {
  const ws = await loadWorkspace()
  // BENCH_TRACING=1 (bench/http.ts): the SDK registers before Berth exists, as in the standalone server.
  const stopTracing = process.env.BENCH_OTLP_URL ? await registerTracing(process.env.BENCH_OTLP_URL) : undefined
  const dataDir = mkdtempSync(join(tmpdir(), `berth-bench-${kind}-`))
  const berth = ws.server.createBerth({
    // fs: no storage given, so Berth uses its default store (SQLite at <dataDir>/berth.db).
    ...(kind === 'memory' && { storage: ws.unstorage.createStorage() }),
    dataDir,
    runtime: false,
    adminToken: ADMIN_TOKEN,
    rateLimit: RATE_LIMIT,
    metrics,
    // As users run it: the request log on (BENCH_REQUEST_LOG=0 for the silent logger), to a sink.
    logger: process.env.BENCH_REQUEST_LOG === '0' ? ws.core.silentLogger : ws.core.jsonLogger(() => {}),
  })
  const server = createServer(berth.handler)
  const port = await listen(server)
  const base = `http://127.0.0.1:${port}`
  const seeded = await seedProfile(base, ADMIN_TOKEN)
  // The metrics are what the server was asked for: a scrape answers exactly when they are on.
  const scrape = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  await scrape.arrayBuffer()
  if (scrape.status !== (metrics ? 200 : 404))
    throw new Error(`GET /metrics → ${scrape.status} with metrics ${metrics}`)

  return {
    ready: {
      type: 'ready',
      port,
      storage: `${kind === 'memory' ? 'unstorage memory' : 'embedded default: sqlite (temp dir)'}${metrics ? ', metrics on' : ''}`,
      path: seeded.path,
      headers: seeded.headers,
      bodyBase64: seeded.body.toString('base64'),
      contentType: seeded.contentType,
      serverDir: ws.serverDir,
    },
    async close() {
      const remaining = await seeded.remaining()
      await closeServer(server)
      await berth.close()
      await stopTracing?.()
      rmSync(dataDir, { recursive: true, force: true })
      return { type: 'closed', limiter: { burst: RATE_LIMIT.burst, remaining } }
    },
  }
}

// Child-process entry.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const send = (msg: unknown) => new Promise<void>((r) => process.send!(msg, () => r()))
  let started: Started | undefined
  let cpu0: NodeJS.CpuUsage | undefined
  let t0 = 0
  process.on('message', (msg: HostConfig | { type: string }) => {
    void (async () => {
      if ('kind' in msg) {
        if (msg.kind === 'standalone')
          throw new Error('the standalone server runs in its own process (standalone-host.ts)')
        started =
          msg.kind === 'bare'
            ? await startBare(msg)
            : msg.kind === 'h3'
              ? await startH3(msg)
              : await startBerth(msg.kind, msg.metrics)
        await send(started.ready)
      } else if (msg.type === 'measure-start') {
        cpu0 = process.cpuUsage()
        t0 = performance.now()
      } else if (msg.type === 'measure-end') {
        const used = process.cpuUsage(cpu0)
        await send({ type: 'cpu', cores: (used.user + used.system) / 1000 / (performance.now() - t0) })
      } else if (msg.type === 'close') {
        const closed = started ? await started.close() : { type: 'closed' }
        await send(closed)
        process.exit(0)
      }
    })().catch(async (err: unknown) => {
      await send({ type: 'error', error: String((err as Error)?.stack ?? err) })
      process.exit(1)
    })
  })
}
