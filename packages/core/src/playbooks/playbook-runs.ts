import type { OnceKeys } from '../coordination/port.js'
import {
  ENDED_TASK_STATUSES,
  isApiError,
  newId,
  randomToken,
  PlaybookRun,
  type PlaybookTrigger,
  type Task,
  type TaskStatus,
} from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, paginate, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { listOrder } from '../records/indexes.js'
import { toView } from '../records/view.js'
import type { EventBus, TaskBusMessage } from '../tasks/event-bus.js'
import type { NotificationsService } from '../integrations/notifications.js'
import type { PlaybookRecord } from './record.js'
import type { TaskRecord } from '../tasks/task.js'
import type { TasksService } from '../tasks/service.js'

/** A stored run. `order` sorts runs started within the same clock tick. */
export interface RunRecord extends OwnedRecord, Omit<PlaybookRun, 'id' | 'created_at' | 'scheduled_for'> {
  order: number
  /** Absent on runs recorded before schedules. */
  scheduled_for?: string | null
}

/** `playbook-run-sessions:<owner>:<session>`: which run a `pb-` session's task belongs to. */
interface RunRef {
  playbook_id: string
  run_id: string
}

export interface PlaybookRunsOptions {
  store: Store
  clock: Clock
  logger: Logger
  bus: EventBus
  tasks: TasksService
  notifications: NotificationsService
  /** Where ending a run is claimed, so of several instances ending it at once one notifies (default: this process's lock only). */
  once?: OnceKeys
  /**
   * With several instances: a run younger than this whose task is not submitted yet may be
   * another live instance's run being started, so `recover()` leaves it (default 0).
   */
  startGraceMs?: number
}

const DONE: readonly TaskStatus[] = ENDED_TASK_STATUSES

let sequence = 0
function nextOrder(): number {
  sequence = (sequence + 1) % 1000
  return Date.now() * 1000 + sequence
}

/**
 * The prompt of a run: the playbook's, and the webhook's JSON body (when there is one)
 * in a fenced block longer than any backtick run inside it, so the body cannot close it.
 *
 * @example
 * ```ts
 * runPrompt('Triage this.', '{"issue":42}') // 'Triage this.\n\nThe webhook ... ```json\n{"issue":42}\n```'
 * ```
 */
export function runPrompt(prompt: string, context?: string): string {
  if (context === undefined) return prompt
  const longest = Math.max(0, ...[...context.matchAll(/`+/g)].map((m) => m[0].length))
  const fence = '`'.repeat(Math.max(3, longest + 1))
  return `${prompt}\n\nThe webhook that started this run delivered this JSON body:\n\n${fence}json\n${context}\n${fence}\n`
}

/**
 * Playbook runs: each run is a task in its own `pb-…` session workspace (hidden from the
 * workspace list). A run's status follows its task: live from the task bus, and when read
 * from the task itself, so a restart in between loses nothing; it finishes the
 * runs whose task ended while no one was listening (`recover()`). When a run ends the owner's
 * integrations get `playbook_run.<status>` (its session's container is released at once
 * by the tasks service). Every trigger starts a new run.
 *
 * @example
 * ```ts
 * const { run_id } = await runs.start(playbook, 'manual')
 * const { items } = await runs.list(caller.id, playbook.id, { page: 1, limit: 20 }, {})
 * ```
 */
export class PlaybookRunsService {
  private readonly lock = new KeyedMutex()

  constructor(private readonly o: PlaybookRunsOptions) {
    o.bus.subscribeAll((m) => this.onTaskMessage(m))
  }

  private collection(playbookId: string): OwnedCollection<RunRecord> {
    return new OwnedCollection<RunRecord>(this.o.store, `playbook-runs:${playbookId}`, 'run')
  }

  /** The run as read: while it is under way, status and times come from its task. */
  view(r: RunRecord, task?: TaskRecord | null): PlaybookRun {
    const live = task && !DONE.includes(r.status) ? fromTask(task) : {}
    return toView(PlaybookRun, r, { scheduled_for: r.scheduled_for ?? null, ...live })
  }

  /**
   * Start a run of `pb` as a task. Always a new run; a task that cannot start makes a failed
   * run. A scheduled run (`scheduledFor`, the slot's ISO time) also records what refused it
   * (`admit`, or the coordination being out of reach), since no caller is there to retry.
   */
  async start(
    pb: PlaybookRecord,
    trigger: PlaybookTrigger,
    context?: string,
    scheduled?: { scheduledFor: string; admit?: () => Promise<void> },
  ): Promise<{ status: 'started'; playbook_id: string; run_id: string }> {
    // Refused whole (503) rather than recorded as a failed run when no task can be submitted now.
    if (!scheduled) this.o.tasks.assertAccepting()
    const owner = pb.owner_id
    const now = isoNow(this.o.clock)
    const sessionId = `pb-${randomToken(24)}`
    let run: RunRecord = {
      id: newId('run'),
      owner_id: owner,
      playbook_id: pb.id,
      profile_id: pb.profile_id,
      status: 'queued',
      trigger,
      task_id: null,
      workspace_id: null,
      session_id: sessionId,
      started_at: null,
      finished_at: null,
      scheduled_for: scheduled?.scheduledFor ?? null,
      error: null,
      created_at: now,
      updated_at: now,
      order: nextOrder(),
    }
    const runs = this.collection(pb.id)
    await runs.put(run)
    // Before the task exists, so no status of it can arrive unattributed.
    await this.o.store.set<RunRef>(`playbook-run-sessions:${owner}:${sessionId}`, {
      playbook_id: pb.id,
      run_id: run.id,
    })
    await this.o.store.set(`active-runs:${run.id}`, { owner, playbook_id: pb.id })
    try {
      await scheduled?.admit?.()
      const { task_id } = await this.o.tasks.submit(
        owner,
        {
          mode: 'session',
          profile_id: pb.profile_id,
          prompt: runPrompt(pb.prompt, context),
          allowed_tools: pb.allowed_tools ?? undefined,
          max_turns: pb.max_turns ?? undefined,
          max_budget_usd: pb.max_budget_usd ?? undefined,
        },
        // At the profile's limit the run waits in the task queue for a slot (never lost).
        { workspace: { session_id: sessionId, name: `Playbook: ${pb.name}`.slice(0, 200) }, queueWhenFull: true },
      )
      const task = await this.o.tasks.records.get(owner, task_id)
      await this.lock.run(run.id, async () => {
        const latest = (await runs.find(owner, run.id)) ?? run
        run = await runs.put({ ...latest, task_id, workspace_id: task.workspace_id, updated_at: isoNow(this.o.clock) })
      })
    } catch (err) {
      const error = isApiError(err)
        ? { code: err.code, error: err.message }
        : { code: 'INTERNAL_ERROR' as const, error: 'Internal error while starting the run' }
      if (!isApiError(err)) this.o.logger.error('playbook run could not start', { run: run.id, error: String(err) })
      await this.end(owner, pb.id, run.id, { status: 'failed', finished_at: isoNow(this.o.clock), error })
    }
    return { status: 'started', playbook_id: pb.id, run_id: run.id }
  }

  /** A playbook's runs, newest first, with their live status. */
  async list(
    owner: string,
    playbookId: string,
    page: Page,
    filter: { status?: TaskStatus | undefined },
  ): Promise<Paged<PlaybookRun>> {
    const runs = this.collection(playbookId)
    const live = async (records: RunRecord[]) => {
      const taskIds = records.filter((r) => r.task_id && !DONE.includes(r.status)).map((r) => r.task_id!)
      const tasks = new Map(
        (await this.o.store.getMany<TaskRecord>(taskIds.map((id) => `tasks:${owner}:${id}`)))
          .filter((t) => t !== null)
          .map((t) => [t!.id, t!]),
      )
      return records.map((r) => this.view(r, r.task_id ? tasks.get(r.task_id) : null))
    }
    // Unfiltered: one page of the playbook's index. A status filter matches the live status
    // (the task's, while the run is under way), so it reads this playbook's runs.
    if (filter.status === undefined) {
      const paged = await runs.list(owner, page)
      return { ...paged, items: await live(paged.items) }
    }
    const records = await runs.all(owner)
    const views = await live(records)
    const matching = records.map((r, i) => ({ r, view: views[i]! })).filter((m) => m.view.status === filter.status)
    const paged = paginate(matching, page, (m) => listOrder('playbook-runs', m.r))
    return { ...paged, items: paged.items.map((m) => m.view) }
  }

  private onTaskMessage(m: TaskBusMessage): void {
    if (m.type !== 'task.status' || !m.task.session_id?.startsWith('pb-')) return
    void this.follow(m.owner_id, m.task).catch((err) =>
      this.o.logger.warn('could not update a playbook run', { task: m.task_id, error: String(err) }),
    )
  }

  /** Mirror a task's status into its run; end the run when the task ended. */
  private async follow(owner: string, task: Task): Promise<void> {
    const ref = await this.o.store.get<RunRef>(`playbook-run-sessions:${owner}:${task.session_id}`)
    if (!ref) return
    if (DONE.includes(task.status)) {
      await this.end(owner, ref.playbook_id, ref.run_id, {
        ...fromTask(task),
        task_id: task.task_id,
        workspace_id: task.workspace_id,
      })
      return
    }
    await this.lock.run(ref.run_id, async () => {
      const runs = this.collection(ref.playbook_id)
      const run = await runs.find(owner, ref.run_id)
      if (run && !DONE.includes(run.status))
        await runs.put({
          ...run,
          ...fromTask(task),
          task_id: task.task_id,
          workspace_id: task.workspace_id,
          updated_at: isoNow(this.o.clock),
        })
    })
  }

  /** Record a run's end once and tell the integrations. */
  private async end(owner: string, playbookId: string, runId: string, changes: Partial<RunRecord>): Promise<void> {
    const ended = await this.lock.run(runId, async () => {
      const runs = this.collection(playbookId)
      const run = await runs.find(owner, runId)
      if (!run || DONE.includes(run.status)) return null
      // Another instance (its recover(), or its copy of the task's end) may be ending it too.
      if (this.o.once && !(await this.o.once.claimOnce(`playbook-run-end:${runId}`, 86_400_000))) return null
      const next = await runs.put({ ...run, ...changes, updated_at: isoNow(this.o.clock) })
      await this.o.store.remove(`active-runs:${runId}`)
      return next
    })
    if (!ended) return
    await this.o.notifications.notify(owner, ended.profile_id, `playbook_run.${ended.status}`, {
      run: this.view(ended),
    })
  }

  /**
   * After a restart: end the runs whose task ended while nothing listened, and fail the
   * ones whose task was never submitted.
   */
  async recover(): Promise<void> {
    for (const key of await this.o.store.keys('active-runs:')) {
      const ref = await this.o.store.get<{ owner: string; playbook_id: string }>(key)
      const runId = key.slice('active-runs:'.length)
      const run = ref && (await this.collection(ref.playbook_id).find(ref.owner, runId))
      if (!ref || !run) {
        await this.o.store.remove(key)
        continue
      }
      const task = run.task_id ? await this.o.tasks.records.find(ref.owner, run.task_id) : null
      if (task && DONE.includes(task.status)) {
        await this.end(ref.owner, ref.playbook_id, runId, fromTask(task))
      } else if (!task) {
        if (!run.task_id && this.o.clock.now() - Date.parse(run.created_at) < (this.o.startGraceMs ?? 0)) continue
        await this.end(ref.owner, ref.playbook_id, runId, {
          status: 'failed',
          finished_at: isoNow(this.o.clock),
          error: { code: 'INTERNAL_ERROR', error: 'The server stopped before the run’s task was submitted' },
        })
      }
    }
  }

  /** Drop a playbook's run history (the playbook was deleted). */
  async removeAll(owner: string, playbookId: string): Promise<void> {
    for (const run of await this.collection(playbookId).all(owner)) {
      await this.o.store.remove(`active-runs:${run.id}`)
      if (run.session_id) await this.o.store.remove(`playbook-run-sessions:${owner}:${run.session_id}`)
      await this.collection(playbookId)
        .remove(owner, run.id)
        .catch(() => {})
    }
  }
}

/** The run fields a task decides. */
function fromTask(
  task: Pick<Task, 'status' | 'started_at' | 'finished_at' | 'error'>,
): Pick<PlaybookRun, 'status' | 'started_at' | 'finished_at' | 'error'> {
  return { status: task.status, started_at: task.started_at, finished_at: task.finished_at, error: task.error }
}
