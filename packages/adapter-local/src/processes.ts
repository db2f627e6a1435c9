import { readFileSync, readdirSync } from 'node:fs'
import { constants } from 'node:os'

interface ProcStat {
  state: string
  start: string
}

function readStat(pid: number): ProcStat | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state: fields[0] ?? '', start: fields[19] ?? '' }
  } catch {
    return null
  }
}

/**
 * The start time of a process (field 22 of `/proc/<pid>/stat`), to tell a live process
 * from a reused pid; `null` where there is no /proc or no such process.
 *
 * @example
 * ```ts
 * const start = processStartTime(child.pid!) // '123456'
 * ```
 */
export function processStartTime(pid: number): string | null {
  return readStat(pid)?.start ?? null
}

/**
 * True when `pid` runs (not a zombie) and, when `start` is known, is the process that started then.
 *
 * @example
 * ```ts
 * if (!isAlive(meta.pid, meta.pidStart)) markExited(meta)
 * ```
 */
export function isAlive(pid: number | null, start: string | null): boolean {
  if (!pid) return false
  try {
    process.kill(pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  const stat = readStat(pid)
  if (!stat) return true // no /proc: trust kill 0
  if (stat.state === 'Z' || stat.state === 'X') return false
  return start === null || stat.start === start
}

/**
 * Resident memory of a process in bytes (`VmRSS`), 0 when unknown.
 *
 * @example
 * ```ts
 * residentBytes(process.pid) // e.g. 52_428_800
 * ```
 */
export function residentBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : 0
  } catch {
    return 0
  }
}

/**
 * Signal a whole process group (children included); ignores groups that are gone.
 *
 * @example
 * ```ts
 * signalGroup(child.pid!, 'SIGKILL') // the command and everything it started
 * ```
 */
export function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal)
  } catch {
    try {
      process.kill(pid, signal)
    } catch {
      // gone
    }
  }
}

/**
 * An exit as engines report it: the code, or 128 + the signal number.
 *
 * @example
 * ```ts
 * exitCodeOf(null, 'SIGKILL') // 137
 * ```
 */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number | null {
  if (code !== null) return code
  if (signal) return 128 + (constants.signals[signal] ?? 0)
  return null
}

/**
 * `pid` and every process descended from it (from /proc; just `[pid]` where there is none).
 * A sandbox's processes hang below its bwrap, in a PID namespace of their own.
 *
 * @example
 * ```ts
 * processTree(meta.pid).reduce((sum, p) => sum + residentBytes(p), 0)
 * ```
 */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>()
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
        children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    return [pid]
  }
  const out: number[] = []
  const todo = [pid]
  while (todo.length) {
    const p = todo.pop()!
    out.push(p)
    todo.push(...(children.get(p) ?? []))
  }
  return out
}
