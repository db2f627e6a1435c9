import type { JobPriority } from './port.js'

const RANK: Record<JobPriority, number> = { high: 0, normal: 1, low: 2 }
/** Room per priority for owner fairness: an owner's 100,000th job and later share a place. */
const FAIRNESS_SPAN = 100_000

/**
 * Where a job goes in its queue, as one number (lower first): its priority, then how many
 * jobs of its owner were already in the queue when it was added, so owners take turns within
 * a priority. Equal numbers keep the order of adding. Fits BullMQ's priorities (1..2^21-1).
 *
 * @example
 * ```ts
 * queueRank('high', 0) // 1
 * queueRank('normal', 2) < queueRank('low', 0) // true
 * ```
 */
export function queueRank(priority: JobPriority, ownerBacklog: number): number {
  return RANK[priority] * FAIRNESS_SPAN + Math.min(Math.max(0, ownerBacklog), FAIRNESS_SPAN - 1) + 1
}

const NAME_RE = /^[A-Za-z0-9_.-]{1,100}$/

/**
 * Check a queue name (letters, digits, `_.-`; drivers build keys from it).
 *
 * @example
 * ```ts
 * checkQueueName('tasks') // ok; checkQueueName('a:b') throws
 * ```
 */
export function checkQueueName(name: string): string {
  if (!NAME_RE.test(name))
    throw new Error(`coordination: invalid queue name ${JSON.stringify(name)} (letters, digits, _ . - up to 100)`)
  return name
}
