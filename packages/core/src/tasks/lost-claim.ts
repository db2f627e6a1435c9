/** The single-use key by which one instance takes over a task a lost instance left. */
import type { TaskRecord } from './record.js'

/** How long the claim on one lost task is kept (only one instance takes it over). */
export const LOST_CLAIM_TTL_MS = 24 * 3_600_000

/**
 * The claim key of a task left by its instance (`once.claimOnce(key, LOST_CLAIM_TTL_MS)`).
 *
 * @example
 * ```ts
 * if (await coordination.once.claimOnce(lostClaimKey(task), LOST_CLAIM_TTL_MS)) takeOver(task)
 * ```
 */
export function lostClaimKey(t: Pick<TaskRecord, 'id' | 'instance_id'>): string {
  return `task-lost:${t.id}:${t.instance_id ?? ''}`
}
