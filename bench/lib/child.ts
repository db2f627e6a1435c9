import { fork, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

let plainTsconfig: string | undefined

/**
 * A tsconfig without the repository's `paths`. The root tsconfig maps `@berth/*` to
 * `packages/*\/src`, and tsx applies that mapping even to imports made by built files
 * outside node_modules: packages/server/dist would then load @berth/core's *source*.
 * Children that load built packages get this one instead (TSX_TSCONFIG_PATH). It lives
 * in node_modules/.cache (ignored by git), not in /tmp, where test clean-ups may sweep it.
 */
function tsconfigWithoutPaths(): string {
  plainTsconfig ??= join(ROOT, 'node_modules/.cache/berth-bench/tsconfig.json')
  if (!existsSync(plainTsconfig)) {
    mkdirSync(dirname(plainTsconfig), { recursive: true })
    writeFileSync(
      plainTsconfig,
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', strict: true } }),
    )
  }
  return plainTsconfig
}

/** A forked TypeScript child speaking JSON messages. */
export interface Child {
  process: ChildProcess
  send(msg: unknown): void
  /** The next message of `type` (an `error` message or an early exit rejects). */
  next<T>(type: string, timeoutMs: number): Promise<T>
  kill(): void
}

/**
 * Fork `file` (relative to bench/lib) under tsx, with only tsx's flags (never the
 * parent's: a `--cpu-prof` of the orchestrator must not profile the children) and the
 * repository's packages resolved as built.
 *
 * @example
 * ```ts
 * const c = forkTs('server-host.ts')
 * c.send({ kind: 'memory' })
 * const ready = await c.next<HostReady>('ready', 30_000)
 * ```
 */
export function forkTs(file: string, execArgv: string[] = []): Child {
  const child = fork(fileURLToPath(new URL(`./${file}`, import.meta.url)), [], {
    cwd: ROOT,
    execArgv: [
      '--import',
      'tsx',
      ...(process.env.BENCH_CHILD_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CHILD_PROF}`] : []),
      ...execArgv,
    ],
    env: { ...process.env, TSX_TSCONFIG_PATH: tsconfigWithoutPaths() },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const queue: { type: string; [k: string]: unknown }[] = []
  const waiters: (() => void)[] = []
  let exited: string | undefined
  const wake = () => {
    for (const w of waiters.splice(0)) w()
  }
  child.on('message', (m: { type: string }) => {
    queue.push(m)
    wake()
  })
  child.on('exit', (code, signal) => {
    exited = `${file} exited (${signal ?? code})`
    wake()
  })
  child.on('error', (err) => {
    exited = `${file}: ${err.message}`
    wake()
  })
  return {
    process: child,
    send: (msg) => child.send(msg as object),
    next<T>(type: string, timeoutMs: number): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          finish()
          reject(new Error(`${file}: no "${type}" within ${timeoutMs} ms`))
        }, timeoutMs)
        const finish = () => {
          clearTimeout(timer)
          const i = waiters.indexOf(check)
          if (i >= 0) waiters.splice(i, 1)
        }
        const check = () => {
          const i = queue.findIndex((m) => m.type === type || m.type === 'error')
          if (i >= 0) {
            const [m] = queue.splice(i, 1)
            finish()
            if (m!.type === 'error') reject(new Error(`${file}: ${String(m!.error)}`))
            else resolve(m as T)
          } else if (exited) {
            finish()
            reject(new Error(`${exited} before sending "${type}"`))
          } else waiters.push(check)
        }
        check()
      })
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    },
  }
}
