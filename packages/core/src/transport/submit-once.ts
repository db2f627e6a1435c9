import { createHash } from 'node:crypto'
import type { Services } from '../services.js'

/** How long a submit in progress holds its `request_id` before another may take over (a crashed instance's). */
const CLAIM_TTL_MS = 60_000
/** How often a resend checks whether the submit it waits for has its task yet. */
const POLL_MS = 25

/** Submits in progress per instance (its services), so a resend here waits without polling. */
const inProgress = new WeakMap<object, Map<string, Promise<string>>>()

/**
 * A WebSocket submit, exactly once per caller and `request_id` across every instance: the
 * first submit claims the id in the coordination backend (`once.setIfAbsent`) and records
 * its task in the store (so a resend after a restart finds it too); a resend gets that task.
 * A resend while the first is still under way waits for it; when the first failed, the
 * resend submits anew (its claim was dropped).
 *
 * @example
 * ```ts
 * const taskId = await submitOnce(services, caller.id, 'req-1', async () => (await services.tasks.submit(caller.id, input)).task_id)
 * ```
 */
export async function submitOnce(
  services: Services,
  owner: string,
  requestId: string,
  submit: () => Promise<string>,
): Promise<string> {
  const key = `ws-requests:${owner}:${createHash('sha256').update(requestId).digest('hex')}`
  let local = inProgress.get(services)
  if (!local) {
    local = new Map()
    inProgress.set(services, local)
  }
  const records = services.tasks.recordsStore
  const once = services.once
  for (let i = 0; i <= CLAIM_TTL_MS / POLL_MS; i++) {
    const mine = local.get(key)
    if (mine) {
      // Same instance: wait for it, then look again (it may have failed).
      await mine.catch(() => {})
      continue
    }
    const seen = await records.get<{ task_id: string }>(key)
    if (seen) return seen.task_id
    if ((await once.setIfAbsent(`req:${key}`, 'submitting', CLAIM_TTL_MS)) === null) {
      const run = (async () => {
        try {
          const taskId = await submit()
          await records.set(key, { task_id: taskId })
          return taskId
        } catch (err) {
          await once.delete(`req:${key}`).catch(() => {})
          throw err
        }
      })()
      local.set(key, run)
      try {
        return await run
      } finally {
        local.delete(key)
      }
    }
    // Another instance is submitting it: its task appears in the store shortly.
    await new Promise((r) => setTimeout(r, POLL_MS))
  }
  throw new Error(`the submit of request ${requestId} did not finish`)
}
