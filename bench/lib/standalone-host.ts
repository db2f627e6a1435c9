/**
 * The standalone server as users run it: `examples/standalone-server` started the way
 * `pnpm start` starts it (`node --import tsx src/main.ts` in that directory, settings from the
 * environment, the default store, metrics on), its request log (stderr) written to a file.
 * Only what the benchmark needs is set: a port, a temp data dir, the operator token, a rate
 * limit bucket that never refuses, and no warm containers.
 */
import { spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Host } from './hosts.js'
import { seedProfile } from './seed.js'
import { ADMIN_TOKEN, RATE_LIMIT } from './server-host.js'

const EXAMPLE_DIR = fileURLToPath(new URL('../../examples/standalone-server/', import.meta.url))

/** utime + stime of process `pid` in seconds (Linux `/proc`), or NaN elsewhere. */
function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // Fields 14 and 15 of stat(5), counted after the command name: clock ticks (100 per second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return NaN
  }
}

/** CLOCK_MONOTONIC in µs: the clock V8 stamps `--cpu-prof` samples with on Linux. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n)

/** A {@link Host} with what only the standalone server has. */
export interface StandaloneHost extends Host {
  /** The measured windows, in {@link monotonicUs}, to cut a `--cpu-prof` profile to. */
  windows: { startUs: number; endUs: number }[]
  /** Where the request log goes. */
  logFile: string
}

/**
 * Start the standalone server in its own process, seed it, and return it as a {@link Host}.
 * `nodeArgs` go before `--import tsx` (e.g. `--cpu-prof`).
 *
 * @example
 * ```ts
 * const host = await startStandalone([])
 * host.measureStart(); … ; const cores = await host.measureEnd()
 * ```
 */
export async function startStandalone(nodeArgs: string[] = []): Promise<StandaloneHost> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-standalone-'))
  const logFile = join(dir, 'requests.log')
  const logFd = openSync(logFile, 'a')
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts'], {
    cwd: EXAMPLE_DIR,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // Settings files (.env, berth.config.*) are looked up here: an empty dir, so none apply.
      INIT_CWD: dir,
      PORT: '0',
      HOST: '127.0.0.1',
      BERTH_DATA_DIR: join(dir, 'data'),
      BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
      BERTH_RATE_RPM: String(RATE_LIMIT.rpm),
      BERTH_RATE_BURST: String(RATE_LIMIT.burst),
      BERTH_POOL_MIN: '0',
      BERTH_WARM_AGENTS: '0',
      // BENCH_STANDALONE_ENV="BERTH_METRICS=off …": more settings, to measure a layer switched off.
      ...Object.fromEntries(
        (process.env.BENCH_STANDALONE_ENV ?? '')
          .split(/\s+/)
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      ),
    },
    stdio: ['ignore', 'pipe', logFd],
  })
  closeSync(logFd)
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
    }
  }
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = ''
      const timer = setTimeout(() => reject(new Error(`standalone server: no listen line in 60 s:\n${out}`)), 60_000)
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString()
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)
        if (m) {
          clearTimeout(timer)
          resolve(Number(m[1]))
        }
      })
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`standalone server exited (${code}):\n${out}\n${readFileSync(logFile, 'utf8').slice(-2000)}`))
      })
    })
    child.stdout!.resume()
    const seeded = await seedProfile(`http://127.0.0.1:${port}`, ADMIN_TOKEN)
    const windows: { startUs: number; endUs: number }[] = []
    let cpu0 = 0
    let t0 = 0
    return {
      type: 'ready',
      kind: 'standalone',
      port,
      storage: 'pnpm start: default store (sqlite), log to a file, metrics on',
      path: seeded.path,
      headers: seeded.headers,
      body: seeded.body,
      bodyBase64: seeded.body.toString('base64'),
      contentType: seeded.contentType,
      windows,
      logFile,
      measureStart() {
        cpu0 = processCpuSeconds(child.pid!)
        t0 = performance.now()
        windows.push({ startUs: monotonicUs(), endUs: Number.POSITIVE_INFINITY })
      },
      async measureEnd() {
        windows.at(-1)!.endUs = monotonicUs()
        return ((processCpuSeconds(child.pid!) - cpu0) * 1000) / (performance.now() - t0)
      },
      async close() {
        const remaining = await seeded.remaining()
        await stop()
        const logBytes = statSync(logFile).size
        rmSync(dir, { recursive: true, force: true })
        return { type: 'closed', limiter: { burst: RATE_LIMIT.burst, remaining }, logBytes }
      },
    }
  } catch (err) {
    await stop()
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
}
