/**
 * The standalone server (examples/standalone-server) as a child process, the way an
 * operator runs it: environment configuration, fs storage in a data dir, a real engine.
 * Captures every log line, so checks can look for 5xx responses and error lines.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const EXAMPLE = fileURLToPath(new URL('../../examples/standalone-server/', import.meta.url))

/** One JSON log line the server wrote (stderr), or a plain line (stdout) as `{ msg }`. */
export interface LogLine {
  level?: string
  msg?: string
  status?: number
  [key: string]: unknown
}

export interface Standalone {
  url: string
  pid: number
  child: ChildProcess
  /** Every line so far, in order; `stdout` lines are plain text. */
  lines: { stream: 'stdout' | 'stderr'; text: string }[]
  /** Resolves once the process exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Resident memory now, in bytes (Linux). */
  rss(): number | null
}

/**
 * Start the standalone server with `env` (on top of this process's PATH and HOME) and wait
 * until it listens. `PORT` defaults to 0 (a free port).
 *
 * @example
 * ```ts
 * const s = await startStandalone({ BERTH_DATA_DIR: dir, BERTH_RUNTIME: 'docker' })
 * await fetch(`${s.url}/health`)
 * ```
 */
export async function startStandalone(
  env: Record<string, string>,
  opts: { timeoutMs?: number /** Node flags before `--import tsx` (e.g. `--cpu-prof`). */; nodeArgs?: string[] } = {},
): Promise<Standalone> {
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), '--import', 'tsx', 'src/main.ts'], {
    cwd: EXAMPLE,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const lines: Standalone['lines'] = []
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  )
  let onListen: ((url: string) => void) | undefined
  for (const stream of ['stdout', 'stderr'] as const) {
    let rest = ''
    child[stream]!.setEncoding('utf8').on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n')
      rest = parts.pop()!
      for (const text of parts) {
        lines.push({ stream, text })
        const m = /Berth listening on (http:\/\/\S+)/.exec(text)
        if (m) onListen?.(m[1]!)
      }
    })
  }
  const timeoutMs = opts.timeoutMs ?? 120_000
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the server did not listen within ${timeoutMs} ms:\n${tail(lines)}`)),
      timeoutMs,
    )
    onListen = (u) => {
      clearTimeout(timer)
      resolve(u)
    }
    void exited.then(({ code, signal }) => {
      clearTimeout(timer)
      reject(new Error(`the server exited (${code ?? signal}) before listening:\n${tail(lines)}`))
    })
  })
  return {
    url,
    pid: child.pid!,
    child,
    lines,
    exited,
    rss() {
      try {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))
        return m ? Number(m[1]) * 1024 : null
      } catch {
        return null
      }
    },
  }
}

/** The last lines of a server's output, for error messages. */
export function tail(lines: Standalone['lines'], n = 30): string {
  return lines
    .slice(-n)
    .map((l) => `  ${l.stream}: ${l.text}`)
    .join('\n')
}

/** The server's structured log lines (stderr JSON). */
export function logLines(lines: Standalone['lines']): LogLine[] {
  return lines.flatMap((l) => {
    if (l.stream !== 'stderr') return []
    try {
      return [JSON.parse(l.text) as LogLine]
    } catch {
      return [{ level: 'unparsed', msg: l.text }]
    }
  })
}
