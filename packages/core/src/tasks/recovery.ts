/** After a restart: the tasks and workspaces a previous process left under way, each brought to a definite state. */
import type { Coordination, OnceKeys } from '../coordination/port.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import { isFilePathError } from '../runtime/errors.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import { recoverVolumes } from '../runtime/volumes.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import { SHARED_QUEUE } from './dispatch.js'
import { LOST_CLAIM_TTL_MS, lostClaimKey } from './lost-instances.js'
import type { TaskEngine } from './engine.js'
import { WORKSPACE_DIR, eventsFile } from './materialize.js'
import { ACTIVE, activeKey, endOf, type ResultEvent, type TaskRecord, type TaskStates } from './task.js'
import type { RunnerEvent } from '@berth/contract'
import { parseRunnerLine } from './runner-lines.js'
import type { SessionContainers } from './session-containers.js'
import type { Transcript } from './transcript.js'
import type { Scheduler } from './scheduler.js'
import type { Clock } from '../ports/clock.js'
import type { Usage } from '../usage/budgets.js'
import { settleUsage } from '../usage/task-end.js'

export interface RecoveryOptions {
  store: Store
  records: OwnedCollection<TaskRecord>
  engine: TaskEngine | undefined
  logger: Logger
  slots: ConcurrencySlots
  workspaces: WorkspacesService
  containers: SessionContainers
  states: TaskStates
  events: Transcript
  /** Where the queued tasks go back, once every workspace is settled. */
  scheduler: Scheduler
  /** How long to wait for a runner still at work to write its result (default 30 s). */
  recoveryGraceMs?: number | undefined
  /** Other live instances' tasks are theirs, not this restart's. */
  coordination?: Coordination | undefined
  /** Where a recovered result's usage is recorded (its metered figures read from). */
  usage?: (Usage & { clock: Clock }) | undefined
  /** Where the claims on lost tasks are made (default the coordination's single-use keys). */
  once?: OnceKeys | undefined
}

/**
 * After a restart: queued tasks go back in the queue; a task that was starting or
 * running gets the result its runner wrote to the workspace's event file (waiting up to
 * `recoveryGraceMs` for a runner still at work), or fails with CONTAINER_FAILED; warm
 * sessions keep their container; every other workspace that was running goes idle; the
 * volumes of deleted workspaces go. The queued tasks go to the scheduler last, once every
 * workspace is settled.
 *
 * @example
 * ```ts
 * await recover({ store, records, engine, logger, slots, workspaces, containers, states, events, scheduler })
 * ```
 */
export async function recover(o: RecoveryOptions): Promise<void> {
  const prefix = activeKey('')
  const refs = await o.store.keys(prefix)
  const owners = await o.store.getMany<{ owner: string }>(refs)
  const tasks: TaskRecord[] = []
  const me = o.coordination?.instanceId
  const others = new Set((await o.coordination?.instances.alive()) ?? [])
  others.delete(me ?? '')
  for (let i = 0; i < refs.length; i++) {
    const t = owners[i] && (await o.records.find(owners[i]!.owner, refs[i]!.slice(prefix.length)))
    if (t && ACTIVE.includes(t.status)) {
      // Under way on another live instance: not ours.
      if (t.instance_id && others.has(t.instance_id)) continue
      // Waiting in the shared queue: stays there (put back if the queue lost it).
      if (t.instance_id === null && t.status === 'queued' && o.coordination) {
        await o.coordination
          .queue(SHARED_QUEUE)
          .add({ id: t.id, owner: t.owner_id, priority: t.priority, payload: { owner: t.owner_id } })
        continue
      }
      // Left by an instance that is gone (this process under an earlier id): ours unless a
      // survivor took it over first; marked ours so that no survivor takes it over later.
      if (t.instance_id && me && t.instance_id !== me) {
        if (!(await (o.once ?? o.coordination!.once).claimOnce(lostClaimKey(t), LOST_CLAIM_TTL_MS))) continue
        t.instance_id = me
        t.takes = (t.takes ?? 0) + 1
        await o.records.put(t)
      }
      tasks.push(t)
    } else await o.store.remove(refs[i]!)
  }
  // Warm containers come back with their workspaces.
  o.containers.adopt()
  await Promise.all(tasks.filter((t) => t.status !== 'queued').map((t) => recoverRun(o, t)))

  const queued = tasks.filter((x) => x.status === 'queued').sort((a, b) => (a.created_at < b.created_at ? -1 : 1))
  for (const t of queued) {
    if (!t.slot_pending) {
      try {
        o.slots.acquire(t.profile_id, t.workspace_id)
      } catch {
        t.slot_pending = true
      }
    }
  }
  const waited = new Set(queued.map((t) => t.workspace_id))
  for (const ws of await o.workspaces.allWithStatus(['running', 'starting'])) {
    if (!ws.instance_id || !others.has(ws.instance_id)) await o.containers.resume(ws, waited.has(ws.id))
  }
  // Volumes are accounted for like containers: those of deleted workspaces go.
  const engine = o.engine
  if (engine) {
    const exists = async (owner: string, wsId: string) => (await o.workspaces.records.find(owner, wsId)) !== null
    await recoverVolumes(engine.runtime, engine.pool.name, exists, o.logger).catch((err: unknown) =>
      o.logger.warn('could not account for volumes', { error: String(err) }),
    )
  }
  for (const t of queued) o.scheduler.enqueue(t)
}

/** A task that was starting or running: the result its runner left, or CONTAINER_FAILED. */
async function recoverRun(o: RecoveryOptions, t: TaskRecord): Promise<void> {
  const engine = o.engine
  const engineId = o.containers.engineIdOf(t.workspace_id)
  let result: ResultEvent | null = null
  let events: RunnerEvent[] = []
  if (engine && engineId) {
    // Real time, not the injectable clock: this is how long the server waits, not a business rule.
    const deadline = performance.now() + (o.recoveryGraceMs ?? 30_000)
    for (;;) {
      events = await readEventFile(engine.runtime, engineId, t.id).catch(() => [])
      result = (events.find((e) => e.type === 'result') as ResultEvent | undefined) ?? null
      const alive = await engine.runtime
        .inspect(engineId)
        .then((i) => i.running)
        .catch(() => false)
      if (result || !alive || performance.now() >= deadline) break
      await new Promise((r) => setTimeout(r, 500))
    }
  }
  // Whatever the log missed (events after its last flush) comes from the runner's file.
  const stored = await o.events.recount(t)
  if (events.length > stored.length) await o.events.record(t, events.slice(stored.length))
  if (result) {
    if (result.session_id) await o.workspaces.patch(t.owner_id, t.workspace_id, { sdk_session_id: result.session_id })
    const end = endOf(result)
    // The task's profile is not read again: of the monthly limits, the caller's applies.
    const settled =
      o.usage && t.started_at
        ? await settleUsage(o.usage, t, end, { profile: null, endedAt: o.usage.clock.now(), runner: result }).catch(
            (err: unknown) => {
              o.logger.warn('could not record task usage', { task: t.id, error: String(err) })
              return end
            },
          )
        : end
    await o.states.finish(t, settled)
  } else {
    await o.states.finish(t, {
      status: 'failed',
      error: {
        code: 'CONTAINER_FAILED',
        error: 'The server restarted while the task was running and its runner left no result',
      },
    })
  }
  // Batch containers are reaped; a session keeps a container that survived.
  if (t.mode === 'batch' || !result) await o.containers.release(t.owner_id, t.workspace_id)
}

/** The runner's event file inside a container, parsed (lines that are no event are skipped; no file, no events). */
async function readEventFile(runtime: ContainerRuntime, engineId: string, taskId: string): Promise<RunnerEvent[]> {
  const bytes = await runtime.readFile(engineId, WORKSPACE_DIR, eventsFile(taskId)).catch((err: unknown) => {
    if (isFilePathError(err)) return null
    throw err
  })
  if (!bytes) return []
  return new TextDecoder()
    .decode(bytes)
    .split('\n')
    .flatMap((line) => {
      const event = parseRunnerLine(line)
      return typeof event === 'string' ? [] : [event]
    })
}
