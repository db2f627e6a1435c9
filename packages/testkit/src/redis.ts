import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { findRepoRoot } from './engines.js'

/** A private `redis-server` started for a test, on a unix socket in a temporary directory. */
export interface LocalRedis {
  /** The unix socket path (ioredis: `new Redis({ path })`). */
  path: string
  /** A new ioredis client on the socket. */
  connect(): Redis
  /** SIGKILL the server: no shutdown, nothing saved (an outage). */
  kill(): Promise<void>
  /** Start it again on the same socket, empty (a restarted or replaced Redis). */
  start(): Promise<void>
  /** Stop the server and remove its directory. */
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
 * Start Debian's `redis-server` (installed by `scripts/redis/ensure.sh` when missing) on a
 * fresh unix socket, with no persistence; `stop()` ends it.
 *
 * @example
 * ```ts
 * const redis = await startRedis()
 * const store = await redisStore({ path: redis.path })
 * await redis.stop()
 * ```
 */
export async function startRedis(): Promise<LocalRedis> {
  const bin = execFileSync('bash', [join(findRepoRoot(), 'scripts/redis/ensure.sh')], { encoding: 'utf8' }).trim()
  const dir = mkdtempSync(join(tmpdir(), 'berth-redis-'))
  const path = join(dir, 'redis.sock')
  let child: ChildProcess | null = null
  const start = async () => {
    rmSync(path, { force: true })
    const c = spawn(
      bin,
      [
        '--port',
        '0',
        '--unixsocket',
        path,
        '--unixsocketperm',
        '700',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    )
    child = c
    for (let i = 0; i < 200 && !(existsSync(path) && (await ping(path))); i++) {
      if (c.exitCode !== null) throw new Error(`redis-server exited with ${c.exitCode}`)
      await new Promise((r) => setTimeout(r, 25))
    }
    if (!(await ping(path))) {
      c.kill('SIGKILL')
      throw new Error('redis-server did not answer on its socket within 5 s')
    }
  }
  const end = async (signal: NodeJS.Signals) => {
    const c = child
    child = null
    if (!c || c.exitCode !== null || c.signalCode !== null) return
    const gone = new Promise((r) => c.once('exit', r))
    c.kill(signal)
    await gone
  }
  await start()
  return {
    path,
    connect: () => connectRedis(path),
    kill: () => end('SIGKILL'),
    start,
    async stop() {
      await end('SIGTERM')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * An ioredis client on a unix socket (for a store in a test or a test's child process).
 *
 * @example
 * ```ts
 * const store = redisStore({ client: connectRedis('/tmp/berth-redis-x/redis.sock') })
 * ```
 */
export function connectRedis(path: string): Redis {
  return new Redis({ path, maxRetriesPerRequest: 3 })
}
