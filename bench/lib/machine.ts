import { readFileSync } from 'node:fs'
import { cpus } from 'node:os'

/** Busy and total CPU time of the whole machine so far (Linux /proc/stat), or null elsewhere. */
export function machineCpu(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!
    const f = line.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0)
    const idle = (f[3] ?? 0) + (f[4] ?? 0)
    return { busy: total - idle, total }
  } catch {
    return null
  }
}

/**
 * Cores busy on the whole machine between two {@link machineCpu} samples.
 *
 * @example
 * ```ts
 * const a = machineCpu(); await work(); const b = machineCpu()
 * busyCores(a, b) // e.g. 1.7 on a 2-core machine
 * ```
 */
export function busyCores(a: ReturnType<typeof machineCpu>, b: ReturnType<typeof machineCpu>): number {
  if (!a || !b || b.total === a.total) return NaN
  return ((b.busy - a.busy) / (b.total - a.total)) * cpus().length
}
