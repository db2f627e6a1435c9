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
  return treeFromChildFiles(pid) ?? treeFromScan(pid)
}

/** The tree from `/proc/<pid>/task/<tid>/children` (fast: no full /proc scan); null where the kernel has none. */
function treeFromChildFiles(pid: number): number[] | null {
  const out: number[] = []
  const todo = [pid]
  while (todo.length) {
    const p = todo.pop()!
    out.push(p)
    let tasks: string[]
    try {
      tasks = readdirSync(`/proc/${p}/task`)
    } catch {
      continue // gone
    }
    for (const tid of tasks) {
      let children: string
      try {
        children = readFileSync(`/proc/${p}/task/${tid}/children`, 'utf8')
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' && p === pid && tid === String(pid)) return null
        continue
      }
      for (const c of children.split(' ')) if (c.trim()) todo.push(Number(c))
    }
  }
  return out
}

function treeFromScan(pid: number): number[] {
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

/**
 * SIGKILL a process group and every descendant of its leader, also those that left the
 * group (a sandbox's init runs in a session of its own): the group is stopped first, so
 * nothing in it starts a new process between the listing and the kill.
 *
 * @example
 * ```ts
 * killTree(child.pid!) // the command, its sandbox and everything in it
 * ```
 */
export function killTree(pid: number): void {
  signalGroup(pid, 'SIGSTOP')
  for (const p of processTree(pid).reverse()) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {
      // gone
    }
  }
  signalGroup(pid, 'SIGKILL')
}

/**
 * Processes whose command line holds `marker` (a sandboxed container's root directory is
 * in its bwrap arguments): finds a sandbox that lost its parent, which no process tree
 * reaches any more. Empty where there is no /proc.
 *
 * @example
 * ```ts
 * for (const pid of processesWith(`${root}/`)) process.kill(pid, 'SIGKILL')
 * ```
 */
export function processesWith(marker: string): number[] {
  const out: number[] = []
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return out
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) out.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return out
}

/**
 * Resolves once `pid` has a descendant `depth` generations down (a sandbox's command runs:
 * keeper → bwrap → the sandbox's init → the command is depth 3), or `pid` is gone, or
 * `timeoutMs` passed; true when the descendant was seen.
 *
 * @example
 * ```ts
 * await descendantRuns(meta.pid, 3) // the container's main command is running
 * ```
 */
export async function descendantRuns(pid: number, depth: number, timeoutMs = 10_000): Promise<boolean> {
  const until = Date.now() + timeoutMs
  for (;;) {
    let level = [pid]
    for (let d = 0; d < depth && level.length; d++)
      level = level.flatMap((p) => processTree(p).filter((c) => parentOf(c) === p))
    if (level.length) return true
    if (!isAlive(pid, null) || Date.now() > until) return false
    await new Promise((r) => setTimeout(r, 5))
  }
}

function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
  } catch {
    return null
  }
}
