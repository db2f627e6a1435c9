/**
 * Redis outages for tests: a redis-server that can be SIGKILLed and started again (empty) on
 * the same socket, and a TCP proxy to it that can be severed and restored (Redis keeps its data).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findRepoRoot } from '@berth/testkit'

/** A redis-server on a fixed unix socket that can die and come back. */
export interface KillableRedis {
  path: string
  /** SIGKILL: no shutdown, nothing saved. */
  kill(): Promise<void>
  /** Start again on the same socket, empty. */
  start(): Promise<void>
  stop(): Promise<void>
}

function ping(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection(path)
    socket.once('error', () => resolve(false))
    socket.once('data', (d) => {
      socket.destroy()
      resolve(d.toString().startsWith('+PONG'))
    })
    socket.once('connect', () => socket.write('PING\r\n'))
  })
}

/**
 * A redis-server without persistence on a socket in a fresh directory.
 *
 * @example
 * ```ts
 * const redis = await killableRedis()
 * await redis.kill()
 * await redis.start() // empty
 * ```
 */
export async function killableRedis(): Promise<KillableRedis> {
  const bin = execFileSync('bash', [join(findRepoRoot(), 'scripts/redis/ensure.sh')], { encoding: 'utf8' }).trim()
  const dir = mkdtempSync(join(tmpdir(), 'berth-redis-outage-'))
  const path = join(dir, 'redis.sock')
  let child: ChildProcess | null = null
  const start = async () => {
    rmSync(path, { force: true })
    child = spawn(bin, ['--port', '0', '--unixsocket', path, '--save', '', '--appendonly', 'no', '--dir', dir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    for (let i = 0; i < 200 && !(existsSync(path) && (await ping(path))); i++)
      await new Promise((r) => setTimeout(r, 25))
    if (!(await ping(path))) throw new Error('redis-server did not answer')
  }
  const kill = async () => {
    const c = child
    if (!c || c.exitCode !== null || c.signalCode !== null) return
    const gone = new Promise((r) => c.once('exit', r))
    c.kill('SIGKILL')
    await gone
    child = null
  }
  await start()
  return {
    path,
    kill,
    start,
    async stop() {
      await kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A TCP proxy to a unix socket that a test can sever (every connection dropped, new ones refused) and restore. */
export interface SeverableProxy {
  /** `redis://127.0.0.1:<port>` */
  url: string
  sever(): void
  restore(): void
  close(): Promise<void>
}

/**
 * Forward `127.0.0.1:<free port>` to the unix socket `target`.
 *
 * @example
 * ```ts
 * const proxy = await severableProxy(redis.path)
 * proxy.sever() // the instance behind it is cut off from Redis
 * ```
 */
export async function severableProxy(target: string): Promise<SeverableProxy> {
  const open = new Set<Socket>()
  let cut = false
  const server = createServer((client) => {
    if (cut) {
      client.destroy()
      return
    }
    const upstream = createConnection(target)
    open.add(client).add(upstream)
    client.pipe(upstream).pipe(client)
    const end = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  return {
    url: `redis://127.0.0.1:${port}`,
    sever() {
      cut = true
      for (const s of open) s.destroy()
    },
    restore() {
      cut = false
    },
    close() {
      cut = true
      for (const s of open) s.destroy()
      return new Promise((r) => server.close(() => r()))
    },
  }
}
