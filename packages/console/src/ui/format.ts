/** Display helpers. */
import { ENDED_TASK_STATUSES } from '@berth/contract'

/**
 * `3 s`, `5 min`, `2 h`, `4 d` since an ISO time.
 *
 * @example
 * ```ts
 * age('2026-01-01T00:00:00Z', Date.parse('2026-01-01T00:05:00Z')) // '5 min'
 * ```
 */
export function age(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—'
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min`
  if (s < 86400) return `${Math.floor(s / 3600)} h`
  return `${Math.floor(s / 86400)} d`
}

/**
 * `$0.0123` (4 decimals under a dollar), `—` when unknown.
 *
 * @example
 * ```ts
 * usd(0.01234) // '$0.0123'
 * ```
 */
export function usd(n: number | null | undefined): string {
  if (n === null || n === undefined) return '—'
  return n < 1 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`
}

/**
 * A byte count for people.
 *
 * @example
 * ```ts
 * bytes(2048) // '2.0 KiB'
 * ```
 */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

export const TERMINAL: ReadonlySet<string> = new Set(ENDED_TASK_STATUSES)

/**
 * A status badge's class.
 *
 * @example
 * ```ts
 * statusClass('running') // 'badge status-running'
 * ```
 */
export function statusClass(status: string): string {
  return `badge status-${status}`
}

/**
 * The first line of a prompt, shortened, without offline-model directives.
 *
 * @example
 * ```ts
 * promptTitle('List files [[berth:tool Bash {}]]') // 'List files'
 * ```
 */
export function promptTitle(prompt: string, max = 90): string {
  const plain = prompt.replace(/\[\[berth:[^\]]*\]\]/g, '').trim() || prompt.trim()
  const line = plain.split('\n')[0] ?? ''
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}
