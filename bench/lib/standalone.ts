/**
 * The standalone server as users run it, in a child process: what `pnpm start` execs
 * (`node --import tsx src/main.ts` in examples/standalone-server, the built packages,
 * settings from the environment), on a free port and a fresh data directory. Stopping it
 * sends SIGTERM, waits for its exit and removes the containers of its pool.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { connectEngine } from '@berth/adapter-docker'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** A running standalone server. */
export interface Standalone {
  url: string
  child: ChildProcess
  /** The `berth.pool` label of its containers. */
  pool: string
  adminToken: string
  /** What it printed on stdout and stderr so far. */
  output(): string
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const { port } = s.address() as { port: number }
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

/**
 * Start a server on `socketPath`'s engine with `env` added to the minimal environment;
 * resolves once `/health` answers (after the pool warmed up, as `pnpm start` listens).
 *
 * @example
 * ```ts
 * const s = await startStandalone({ engine: 'docker', socketPath, image, env: { BERTH_POOL_MIN: '2' } })
 * await s.stop()
 * ```
 */
export async function startStandalone(o: {
  engine: string
  socketPath: string
  image: string
  env?: Record<string, string>
  /** Another checkout of Berth (built) whose server to run, to compare two builds; default this one. */
  root?: string
}): Promise<Standalone> {
  const example = join(o.root ?? ROOT, 'examples/standalone-server')
  const port = await freePort()
  const pool = `bench-ttft-${randomBytes(4).toString('hex')}`
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-ttft-'))
  const adminToken = `bench-${randomBytes(8).toString('hex')}`
  const child = spawn(
    process.execPath,
    ['--import', pathToFileURL(join(example, 'node_modules/tsx/dist/loader.mjs')).href, join(example, 'src/main.ts')],
    {
      cwd: example,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/root',
        INIT_CWD: dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        BERTH_DATA_DIR: dataDir,
        BERTH_ADMIN_TOKEN: adminToken,
        BERTH_POOL_NAME: pool,
        BERTH_RUNTIME: o.engine,
        BERTH_ENGINE_URL: `unix://${o.socketPath}`,
        BERTH_IMAGE: o.image,
        ...o.env,
      },
    },
  )
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    const gone = child.exitCode === null ? new Promise((r) => child.once('exit', r)) : Promise.resolve()
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {
      // already gone
    }
    await Promise.race([gone, new Promise((r) => setTimeout(r, 30_000).unref())])
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL')
    // The warm containers it leaves for its next start, and nothing else.
    const { docker } = connectEngine({ socketPath: o.socketPath })
    const left = await docker.listContainers({ all: true, filters: { label: [`berth.pool=${pool}`] } }).catch(() => [])
    await Promise.all(
      left.map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    )
    rmSync(dataDir, { recursive: true, force: true })
  }
  for (const until = Date.now() + 180_000; ; ) {
    if (child.exitCode !== null) {
      await stop()
      throw new Error(`the standalone server exited: ${out}`)
    }
    if (Date.now() > until) {
      await stop()
      throw new Error(`the standalone server did not answer /health: ${out}`)
    }
    const up = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    )
    if (up) break
    await new Promise((r) => setTimeout(r, 200))
  }
  return { url, child, pool, adminToken, output: () => out, stop }
}
