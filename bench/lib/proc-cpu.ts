/**
 * CPU time of processes from `/proc` (Linux), in seconds: what a benchmark charges to the
 * server under test and to its database, whatever else the shared machine runs.
 */
import { readdirSync, readFileSync } from 'node:fs'

const TICK = 100 // USER_HZ on Linux

/** utime, stime, cutime, cstime of one process, in seconds (null once it is gone). */
function times(pid: number): number[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start at ") ".
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return [f[11], f[12], f[13], f[14]].map((x) => Number(x) / TICK)
  } catch {
    return null
  }
}

/**
 * CPU seconds one process has used itself (not its children).
 *
 * @example
 * ```ts
 * const before = processCpu(server.pid)
 * ```
 */
export function processCpu(pid: number): number {
  const t = times(pid)
  return t ? t[0]! + t[1]! : 0
}

/**
 * CPU seconds of a process tree one level deep: the parent with its reaped children, plus
 * its live children (PostgreSQL's postmaster and its backends).
 *
 * @example
 * ```ts
 * const pgCpu = treeCpu(findPid((cmd) => cmd.includes(`${dir}/data`))!)
 * ```
 */
export function treeCpu(pid: number): number {
  const t = times(pid)
  if (!t) return 0
  let sum = t[0]! + t[1]! + t[2]! + t[3]!
  for (const child of readdirSync('/proc')) {
    if (!/^\d+$/.test(child)) continue
    try {
      const stat = readFileSync(`/proc/${child}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== pid) continue
    } catch {
      continue
    }
    const c = times(Number(child))
    if (c) sum += c[0]! + c[1]!
  }
  return sum
}

/**
 * The first process whose command line (arguments joined by spaces) matches.
 *
 * @example
 * ```ts
 * const postmaster = findPid((cmd) => cmd.includes('/tmp/berth-postgres-x/data'))
 * ```
 */
export function findPid(match: (cmdline: string) => boolean): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (match(readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' '))) return Number(entry)
    } catch {}
  }
  return null
}
