import { ApiError } from '@berth/contract'
import type { Coordination, OnceKeys } from '../coordination/port.js'
import type { Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { RateLimiter } from '../limits/rate-limit.js'
import type { PlaybookRunsService } from './playbook-runs.js'
import type { PlaybooksService } from './playbooks.js'
import { SCHEDULES_PREFIX, SLOTS_PREFIX, type LastSlot, type ScheduleEntry } from './record.js'
import { dueSlot } from './schedule.js'

/** Timers the scheduler ticks with; tests pass their own (or none and call `tick()`). */
export interface SchedulerTimers {
  setInterval(fn: () => void, ms: number): unknown
  clearInterval(handle: unknown): void
}

export interface PlaybookSchedulerOptions {
  store: Store
  clock: Clock
  logger: Logger
  coordination: Coordination
  /** Where each slot is claimed: with a shared coordination, the durable single-use keys. */
  once: OnceKeys
  playbooks: PlaybooksService
  runs: PlaybookRunsService
  /** The callers' rate limiter: a scheduled run spends one request of its owner's, as the run endpoint does. */
  rateLimiter?: RateLimiter | undefined
  /** How often each instance looks for due slots (default 1 s). */
  tickMs?: number
  /** A slot later than this when first seen was missed (every instance down): its `missed` policy decides (default 60 s). */
  graceMs?: number
  timers?: SchedulerTimers
}

const realTimers: SchedulerTimers = {
  setInterval: (fn, ms) => setInterval(fn, ms).unref(),
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
}

/**
 * Runs scheduled playbooks. Every instance ticks; at each tick, each enabled schedule's
 * latest slot since the one last taken care of is claimed through the coordination's
 * single-use keys (`playbook-slot:<id>:<slot>`), so one instance runs it, and the slot is
 * then recorded in the store (`playbook-slots:<id>`), which every later tick, after a
 * restart too, counts from. A slot seen within `graceMs` runs; an older one passed while
 * no instance ran and follows the playbook's `missed` policy: one run (`run_once`) or
 * none (`skip`). While the coordination is out of reach the tick claims nothing.
 *
 * @example
 * ```ts
 * const scheduler = new PlaybookScheduler({ store, clock, logger, coordination, once, playbooks, runs })
 * scheduler.start() // ticks every second until close()
 * await scheduler.tick() // or drive it by hand
 * ```
 */
export class PlaybookScheduler {
  private handle: unknown = null
  private ticking: Promise<void> | null = null

  constructor(private readonly o: PlaybookSchedulerOptions) {}

  /** Tick now (the slots missed while no instance ran are decided at once) and then every `tickMs`. */
  start(): void {
    if (this.handle !== null) return
    const timers = this.o.timers ?? realTimers
    this.handle = timers.setInterval(() => void this.tick(), this.o.tickMs ?? 1000)
    void this.tick()
  }

  /** Stop ticking; a tick under way finishes. */
  async close(): Promise<void> {
    if (this.handle !== null) (this.o.timers ?? realTimers).clearInterval(this.handle)
    this.handle = null
    await this.ticking
  }

  /** One look for due slots; a tick still under way is joined instead of started twice. */
  tick(): Promise<void> {
    this.ticking ??= this.scan().finally(() => {
      this.ticking = null
    })
    return this.ticking
  }

  private async scan(): Promise<void> {
    const state = this.o.coordination.state()
    // Out of reach or fenced: another instance may be claiming; claim nothing until back.
    if (!state.reachable || !state.leased) return
    try {
      const keys = await this.o.store.keys(SCHEDULES_PREFIX)
      const entries = await this.o.store.getMany<ScheduleEntry>(keys)
      const lasts = await this.o.store.getMany<LastSlot>(
        keys.map((k) => SLOTS_PREFIX + k.slice(SCHEDULES_PREFIX.length)),
      )
      const now = this.o.clock.now()
      await Promise.all(
        keys.map((key, i) => {
          const entry = entries[i]
          if (!entry) return undefined
          const id = key.slice(SCHEDULES_PREFIX.length)
          return this.consider(id, entry, lasts[i]?.at ?? 0, now).catch((err) =>
            this.o.logger.warn('scheduled playbook run failed', { playbook: id, error: String(err) }),
          )
        }),
      )
    } catch (err) {
      this.o.logger.warn('playbook schedule tick failed', { error: String(err) })
    }
  }

  /** Claim and take care of the playbook's due slot, if it has one. */
  private async consider(id: string, entry: ScheduleEntry, lastAt: number, now: number): Promise<void> {
    const slot = dueSlot(entry.schedule, Math.max(entry.armed_at, lastAt), now)
    if (!slot) return
    // Held until the next slot is due (and a minute beyond): by then a tick asks for that one.
    const ttl = Math.max(60_000, (slot.next ?? now + 86_400_000) - now + 60_000)
    if (!(await this.o.once.claimOnce(`playbook-slot:${id}:${slot.at}`, ttl))) return
    const missed = now - slot.at > (this.o.graceMs ?? 60_000)
    const pb = await this.o.playbooks.records.find(entry.owner_id, id)
    // Changed or disabled since the entry was read: its next save decides.
    if (pb?.trigger_type !== 'schedule' || pb.enabled === false) return
    if (missed && entry.schedule.missed === 'skip') {
      await this.record(id, { at: slot.at, run_id: null })
      this.o.logger.info('scheduled playbook slot missed, skipped', { playbook: id, slot: iso(slot.at) })
      return
    }
    // Recorded before the run starts: a crash in between loses the slot rather than running it twice.
    await this.record(id, { at: slot.at, run_id: null })
    const { run_id } = await this.o.runs.start(pb, 'schedule', undefined, {
      scheduledFor: iso(slot.at),
      admit: () => this.admit(pb.owner_id),
    })
    await this.record(id, { at: slot.at, run_id })
  }

  /** The owner's rate limit, as a call of the run endpoint would spend it. */
  private async admit(owner: string): Promise<void> {
    const decision = await this.o.rateLimiter?.take(owner)
    if (decision && !decision.allowed)
      throw new ApiError('RATE_LIMITED', 'The owner’s request rate limit was reached when this slot came', {
        limit: decision.limit,
        retry_after: decision.retryAfterSeconds,
      })
  }

  /** The slot goes forward only: a slower instance never moves it back. */
  private async record(id: string, last: LastSlot): Promise<void> {
    const key = `${SLOTS_PREFIX}${id}`
    const current = await this.o.store.get<LastSlot>(key)
    if (current && current.at > last.at) return
    await this.o.store.set<LastSlot>(key, last)
  }
}

const iso = (ms: number) => new Date(ms).toISOString()
