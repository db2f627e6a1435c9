import { execFileSync, spawn } from 'node:child_process'
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
  const child = spawn(
    bin,
    ['--port', '0', '--unixsocket', path, '--unixsocketperm', '700', '--save', '', '--appendonly', 'no', '--dir', dir],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  )
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  for (let i = 0; i < 200 && !(existsSync(path) && (await ping(path))); i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`)
    await new Promise((r) => setTimeout(r, 25))
  }
  if (!(await ping(path))) {
    child.kill('SIGKILL')
    throw new Error('redis-server did not answer on its socket within 5 s')
  }
  return {
    path,
    connect: () => connectRedis(path),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM')
      await exited
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
