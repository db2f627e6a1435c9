/**
 * The usage ledger: what every caller's model calls and tasks used, in the store. The
 * store has no atomic increment, so each instance keeps its own partial sums (per caller
 * and UTC day, per caller and month, per task) under keys that end in its instance id:
 * only that instance writes them, one write at a time, and a read sums every instance's.
 * No update is lost, and every instance reads the same figures.
 */
import type { UsageFigures } from '@berth/contract'
import type { Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { KeyedMutex } from '../internal/mutex.js'

/** What one metered model call used (the gateway's `ModelUsage` fits). */
export interface ModelCallUsage {
  model: string
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
  cost_usd: number
}

/** Who a model call or a task counts for. */
export interface UsageSubject {
  owner_id: string
  task_id: string
  profile_id: string
}

/** One (profile, model) group of a caller's day. */
export interface DayGroup extends UsageFigures {
  profile_id: string
  model: string
}

/** One instance's sums of a caller's day, by `<profile_id> <model>`. */
export interface DayDoc {
  groups: Record<string, DayGroup>
}

/** One instance's spend of a caller's month: in all, and by profile. */
interface MonthDoc {
  cost_usd: number
  profiles: Record<string, number>
}

/** The model calls recorded for one task (one instance's part). */
export interface TaskUsage {
  model: string
  requests: number
  input_tokens: number
  output_tokens: number
  cache_read_tokens: number
  cache_write_tokens: number
  cost_usd: number
}

/** Zeroed figures. */
export function emptyFigures(): UsageFigures {
  return {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cost_usd: 0,
    model_calls: 0,
    tasks: 0,
    task_seconds: 0,
  }
}

/** Add `b` into `a`. */
export function addFigures(a: UsageFigures, b: UsageFigures): UsageFigures {
  a.input_tokens += b.input_tokens
  a.output_tokens += b.output_tokens
  a.cache_read_tokens += b.cache_read_tokens
  a.cache_write_tokens += b.cache_write_tokens
  a.cost_usd += b.cost_usd
  a.model_calls += b.model_calls
  a.tasks += b.tasks
  a.task_seconds += b.task_seconds
  return a
}

/** `YYYY-MM-DD` of a time, in UTC. */
export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10)
/** `YYYY-MM` of a time, in UTC. */
export const monthOf = (ms: number) => new Date(ms).toISOString().slice(0, 7)

export const DAY_PREFIX = 'usage-day:'
const MONTH_PREFIX = 'usage-month:'
const TASK_PREFIX = 'usage-task:'

export interface UsageLedgerOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** This instance: the last segment of every key it writes. */
  instanceId: string
}

/**
 * Records model calls and task ends, and reads them back summed over instances.
 *
 * @example
 * ```ts
 * const ledger = new UsageLedger({ store, clock, logger, instanceId: coordination.instanceId })
 * await ledger.recordCall({ owner_id, task_id, profile_id }, usage)
 * await ledger.monthSpend(owner_id) // { cost_usd, profiles: { prof_1: 0.03 } }
 * ```
 */
export class UsageLedger {
  private readonly instance: string
  private readonly lock = new KeyedMutex()
  /** This instance's own documents, as last written (only it writes them). */
  private readonly mine = new Map<string, unknown>()
  /** Writes under way per task, awaited before a task's totals are read. */
  private readonly pending = new Map<string, Set<Promise<unknown>>>()

  constructor(private readonly o: UsageLedgerOptions) {
    // Keys are `:`-separated: an instance id with one would read as two segments.
    this.instance = o.instanceId.replace(/:/g, '_')
  }

  /**
   * Add one metered model call (or `calls` of one model, summed, as a runner reports them
   * at its end): to its day, its month and its task.
   */
  recordCall(subject: UsageSubject, usage: ModelCallUsage, calls = 1): Promise<void> {
    const figures: UsageFigures = {
      ...emptyFigures(),
      input_tokens: usage.input_tokens,
      output_tokens: usage.output_tokens,
      cache_read_tokens: usage.cache_read_input_tokens,
      cache_write_tokens: usage.cache_creation_input_tokens,
      cost_usd: usage.cost_usd,
      model_calls: calls,
    }
    const done = Promise.all([
      this.addDay(subject, usage.model, figures),
      this.addTask(subject.task_id, usage.model, figures),
    ]).then(() => undefined)
    return this.track(subject.task_id, done)
  }

  /** Add a task's end: one task and its running time (its model calls are recorded as calls). */
  recordTaskEnd(subject: UsageSubject, end: { model: string; seconds: number }): Promise<void> {
    const figures: UsageFigures = { ...emptyFigures(), tasks: 1, task_seconds: Math.max(0, end.seconds) }
    return this.addDay(subject, end.model, figures)
  }

  /** The model calls recorded for a task on every instance, summed, or null when none were. */
  async taskUsage(taskId: string): Promise<TaskUsage | null> {
    await Promise.allSettled([...(this.pending.get(taskId) ?? [])])
    const parts = await this.readAll<TaskUsage>(`${TASK_PREFIX}${taskId}:`)
    if (parts.length === 0) return null
    const sum: TaskUsage = { ...parts[0]!, requests: 0 }
    for (const k of ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'cost_usd'] as const)
      sum[k] = 0
    for (const p of parts) {
      sum.requests += p.requests
      sum.input_tokens += p.input_tokens
      sum.output_tokens += p.output_tokens
      sum.cache_read_tokens += p.cache_read_tokens
      sum.cache_write_tokens += p.cache_write_tokens
      sum.cost_usd += p.cost_usd
    }
    return sum
  }

  /** A caller's spend in the calendar month (UTC) of `at` (default now): in all and by profile. */
  async monthSpend(owner: string, at = this.o.clock.now()): Promise<MonthDoc> {
    const parts = await this.readAll<MonthDoc>(`${MONTH_PREFIX}${owner}:${monthOf(at)}:`)
    const sum: MonthDoc = { cost_usd: 0, profiles: {} }
    for (const p of parts) {
      sum.cost_usd += p.cost_usd
      for (const [id, cost] of Object.entries(p.profiles)) sum.profiles[id] = (sum.profiles[id] ?? 0) + cost
    }
    return sum
  }

  /**
   * Every instance's day documents of one caller (or all callers) between two days, both
   * included, with the caller and day each holds.
   */
  async days(owner: string | undefined, from: string, to: string) {
    const keys = (await this.o.store.keys(owner ? `${DAY_PREFIX}${owner}:` : DAY_PREFIX)).filter((k) => {
      const day = k.split(':')[2] ?? ''
      return day >= from && day <= to
    })
    const docs = keys.length ? await this.o.store.getMany<DayDoc>(keys) : []
    return keys.flatMap((k, i) => {
      const doc = docs[i]
      const [, user, day] = k.split(':')
      return doc && user && day ? [{ user_id: user, day, doc }] : []
    })
  }

  private addDay(subject: UsageSubject, model: string, f: UsageFigures): Promise<void> {
    const now = this.o.clock.now()
    const dayKey = `${DAY_PREFIX}${subject.owner_id}:${dayOf(now)}:${this.instance}`
    const group = `${subject.profile_id} ${model}`
    const day = this.update<DayDoc>(dayKey, { groups: {} }, (doc) => {
      const g = doc.groups[group] ?? { profile_id: subject.profile_id, model, ...emptyFigures() }
      doc.groups[group] = addFigures(g, f) as DayGroup
    })
    if (f.cost_usd === 0) return day
    const monthKey = `${MONTH_PREFIX}${subject.owner_id}:${monthOf(now)}:${this.instance}`
    const month = this.update<MonthDoc>(monthKey, { cost_usd: 0, profiles: {} }, (doc) => {
      doc.cost_usd += f.cost_usd
      doc.profiles[subject.profile_id] = (doc.profiles[subject.profile_id] ?? 0) + f.cost_usd
    })
    return Promise.all([day, month]).then(() => undefined)
  }

  private addTask(taskId: string, model: string, f: UsageFigures): Promise<void> {
    const empty: TaskUsage = {
      model,
      requests: 0,
      input_tokens: 0,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd: 0,
    }
    return this.update<TaskUsage>(`${TASK_PREFIX}${taskId}:${this.instance}`, empty, (t) => {
      t.model = model
      t.requests += f.model_calls
      t.input_tokens += f.input_tokens
      t.output_tokens += f.output_tokens
      t.cache_read_tokens += f.cache_read_tokens
      t.cache_write_tokens += f.cache_write_tokens
      t.cost_usd += f.cost_usd
    })
  }

  /** Change one of this instance's documents: one change at a time per key, read once from the store. */
  private update<T>(key: string, empty: T, change: (doc: T) => void): Promise<void> {
    return this.lock.run(key, async () => {
      let doc = this.mine.get(key) as T | undefined
      // After a restart with the same instance id, its documents are in the store.
      doc ??= (await this.o.store.get<T>(key)) ?? structuredClone(empty)
      change(doc)
      await this.o.store.set(key, doc)
      // A task's document is read back once, at its end: not worth keeping in memory.
      if (!key.startsWith(TASK_PREFIX)) this.mine.set(key, doc)
    })
  }

  private async readAll<T>(prefix: string): Promise<T[]> {
    const keys = await this.o.store.keys(prefix)
    if (keys.length === 0) return []
    return (await this.o.store.getMany<T>(keys)).filter((d): d is Awaited<T> => d !== null) as T[]
  }

  private track(taskId: string, p: Promise<void>): Promise<void> {
    const set = this.pending.get(taskId) ?? new Set()
    set.add(p)
    this.pending.set(taskId, set)
    const done = () => {
      set.delete(p)
      if (set.size === 0) this.pending.delete(taskId)
    }
    p.then(done, (err: unknown) => {
      done()
      this.o.logger.warn('could not record model usage', { task: taskId, error: String(err) })
    })
    return p
  }
}
