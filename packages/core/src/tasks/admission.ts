/** What a submit checks and takes before it writes anything: the session it follows up, whether its container could ever fit the host's memory, its profile's slot. */
import { ApiError, isApiError, validationError, type SubmitTask } from '@berth/contract'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Clock } from '../ports/clock.js'
import type { OwnedCollection } from '../records/collection.js'
import { term } from '../records/indexes.js'
import type { EnvironmentsService } from '../resources/environments.js'
import type { ProfileRecord } from '../resources/profiles.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import type { TaskEngine } from './engine.js'
import type { IdleYield } from './idle-yield.js'
import type { TaskRecord } from './task.js'
import { TIME_LIMIT_GRACE_MS } from './time-limit.js'

/** The workspace of a follow-up's `session_id` (null for a new workspace), or 400 naming the field. */
export async function sessionWorkspace(
  workspaces: WorkspacesService,
  owner: string,
  input: Pick<SubmitTask, 'session_id'>,
  profile: ProfileRecord,
): Promise<WorkspaceRecord | null> {
  if (!input.session_id) return null
  const ws = await workspaces.bySession(owner, input.session_id)
  if (!ws)
    throw validationError([
      { location: 'body', path: 'session_id', message: `session ${input.session_id} does not exist` },
    ])
  if (ws.profile_id !== profile.id)
    throw validationError([
      {
        location: 'body',
        path: 'profile_id',
        message: `session ${input.session_id} belongs to profile ${ws.profile_id}`,
      },
    ])
  return ws
}

/**
 * 400 when the task's container (its profile's environment's memory cap, or the pool's
 * default) is larger than the host's whole memory budget: it could never be admitted, so
 * it is refused now rather than left waiting forever.
 */
export async function assertFitsMemory(
  engine: TaskEngine | undefined,
  environments: EnvironmentsService,
  owner: string,
  profile: ProfileRecord,
): Promise<void> {
  const pool = engine?.pool
  if (!pool?.memoryBudget) return
  const bytes = await environments.memoryBytes(owner, profile.environment_id)
  pool.assertFits(bytes)
}

/** What a submit's slot is taken with: the profile's slots, the idle sessions that yield one, the tasks that say when one frees. */
export interface SlotDeps {
  slots: ConcurrencySlots
  room: Pick<IdleYield, 'forSubmit'>
  records: OwnedCollection<TaskRecord>
  clock: Clock
}

/** A submit's slot: taken (`undo` gives it back when the submit fails after all), or `pending`: the task waits in the queue for one. */
export interface SubmitSlot {
  pending: boolean
  undo(): void
}

/**
 * Take the profile's slot for a submit's workspace (counted over every instance). When
 * every slot is taken, a playbook or webhook run (`queueWhenFull`) waits in the queue for
 * one, and so does a task whose slot an idle session holds (the session yields it, see
 * {@link IdleYield}); otherwise 429 CONCURRENCY_LIMIT, whose `Retry-After` says when the
 * first task under way will have ended at the latest ({@link slotRefusal}).
 */
export async function takeSlot(
  deps: SlotDeps,
  submit: { owner: string; profileId: string; wsId: string; queueWhenFull?: boolean | undefined },
): Promise<SubmitSlot> {
  const { slots } = deps
  const { owner, profileId, wsId } = submit
  const held = slots.has(profileId, wsId)
  try {
    await slots.take(profileId, wsId)
    return { pending: false, undo: () => !held && slots.release(profileId, wsId) }
  } catch (err) {
    if (!isApiError(err) || err.code !== 'CONCURRENCY_LIMIT') throw err
    if (submit.queueWhenFull || (await deps.room.forSubmit(profileId))) return { pending: true, undo: () => {} }
    throw await slotRefusal(deps, owner, profileId, err)
  }
}

/**
 * The 429 of a submit whose profile's slots are all held by tasks under way, saying when
 * one frees at the latest: the earliest end of the profile's running tasks at their
 * `max_duration_s` (from their start, or from now for one starting), plus the grace an
 * interrupted run gets, in `Retry-After`, `details.retry_after` and `details.frees_at`.
 * When none of them runs yet (they wait for memory or their container), the slots' own
 * answer stands (ask again in 10 s).
 */
export async function slotRefusal(deps: SlotDeps, owner: string, profileId: string, err: ApiError): Promise<ApiError> {
  const now = deps.clock.now()
  let at = Infinity
  for (const status of ['running', 'starting'] as const) {
    const { items } = await deps.records.list(owner, { limit: 500 }, term({ status }))
    for (const t of items) {
      const limitS = t.max_duration_s
      if (t.profile_id !== profileId || !limitS) continue
      const from = t.started_at ? Date.parse(t.started_at) : now
      at = Math.min(at, from + limitS * 1000 + TIME_LIMIT_GRACE_MS)
    }
  }
  if (at === Infinity) return err
  const retry = Math.max(1, Math.ceil((at - now) / 1000))
  const details = { ...err.details, retry_after: retry, frees_at: new Date(at).toISOString() }
  return new ApiError('CONCURRENCY_LIMIT', err.message, details, { 'retry-after': String(retry) })
}
