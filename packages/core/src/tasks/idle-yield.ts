/** Idle sessions yield to waiting work: the longest-idle session holding what a task waits for is released, here or on the instance that holds it. */
import { randomUUID } from 'node:crypto'
import type { Coordination } from '../coordination/port.js'
import type { Logger } from '../ports/logger.js'
import type { IdleSessionsStats, Metrics } from '../ports/metrics.js'
import { DEFAULT_CONTAINER_MEMORY_BYTES } from '../runtime/pool-memory.js'
import type { TaskEngine } from './engine.js'
import type { EventBus } from './event-bus.js'
import type { IdleSession, SessionContainers } from './session-containers.js'

/** What a waiting task needs that an idle session may hold: a slot of its profile, or one of its caller's. */
export type Want = { profile: string } | { caller: string }

/** The channel instances ask each other for idle sessions on, offer theirs and are told to release one. */
export const YIELD_CHANNEL = 'idle-yield'

/** How long an ask waits for the other instances' offers (an instance that does not answer in time offers nothing). */
const OFFER_WAIT_MS = 1_000
/** How long a release awarded to another instance counts as under way without word from it. */
const RELEASE_WAIT_MS = 30_000
/** After an ask found no idle session anywhere, the waiting tasks' retries ask again only after this. */
const QUIET_MS = 2_000

type Offer = { offer: string; to: string; by: string; ws: string | null; idle_ms: number }
type YieldMessage =
  | { ask: string; from: string; want: Want }
  | Offer
  | { award: string; to: string; from: string; ws: string }
  | { released: string; to: string }

export interface IdleYieldOptions {
  containers: SessionContainers
  coordination: Coordination
  /** Whether the instances share the slots (several instances): idle sessions of the others are asked for too. */
  shared: boolean
  engine: TaskEngine | undefined
  /** Where a task's wait for room in the pool is heard (its `waiting` reason `memory` or `pool_full`). */
  bus: EventBus
  metrics: Metrics
  logger: Logger
}

const keyOf = (want: Want) => ('profile' in want ? `profile:${want.profile}` : `caller:${want.caller}`)
const holds = (s: IdleSession, want: Want) =>
  'profile' in want ? s.profile_id === want.profile : s.owner_id === want.caller

/**
 * An idle session (a warm container no task is running or queued in) is spare capacity:
 * when a task waits for memory or room in this instance's pool, for a slot of its profile
 * or for its caller's cap, the session idle the longest that holds it is released as its
 * idle timer would release it (agent ended, files and conversation kept, resumed by its
 * next follow-up), one at a time until the task fits. Slots and caps count over every
 * instance: an ask goes to all of them on {@link YIELD_CHANNEL}, each offers its
 * longest-idle match, and the longest idle of all is told to go. The memory budget is each
 * instance's own, so memory is only made here.
 *
 * @example
 * ```ts
 * const room = new IdleYield({ containers, coordination, shared: slots.isShared, engine, bus, metrics, logger })
 * await room.start()
 * if (await room.forSubmit('prof_1')) queueForTheSlot() // else 429
 * ```
 */
export class IdleYield {
  /** Releases under way (here, or told to another instance), by what they free: `profile:…`, `caller:…`, `room`. */
  private readonly underWay = new Map<string, number>()
  /** What an ask found nowhere, until when it is not asked for again. */
  private readonly quiet = new Map<string, number>()
  /** This instance's asks waiting for offers, by ask id. */
  private readonly asks = new Map<string, (offer: Offer) => void>()
  /** Releases told to other instances, by ask id: ends them when the holder says it is done. */
  private readonly told = new Map<string, () => void>()
  private unsubscribe: (() => Promise<void>) | null = null
  private readonly offBus: () => void

  constructor(private readonly o: IdleYieldOptions) {
    o.metrics.watchIdleSessions(() => this.stats())
    this.offBus = o.bus.subscribeAll((m) => {
      const reason = m.type === 'task.status' && m.status === 'queued' ? m.task.waiting?.reason : undefined
      if (reason === 'memory' || reason === 'pool_full') this.forRoom()
    })
  }

  /** Hear the other instances' asks (several instances only). */
  async start(): Promise<void> {
    if (!this.o.shared || this.unsubscribe) return
    this.unsubscribe = await this.o.coordination.pubsub.subscribe<YieldMessage>(YIELD_CHANNEL, (m) => this.heard(m))
  }

  async close(): Promise<void> {
    this.offBus()
    for (const end of this.told.values()) end()
    await this.unsubscribe?.().catch(() => {})
    this.unsubscribe = null
  }

  /** This instance's idle sessions and the memory their containers reserve (the gauges). */
  stats(): IdleSessionsStats {
    const idle = this.o.containers.idleSessions()
    const pool = this.o.engine?.pool
    const byDefault = pool?.memoryBudget?.capOf(undefined) ?? DEFAULT_CONTAINER_MEMORY_BYTES
    return {
      sessions: idle.length,
      memoryBytes: idle.reduce((sum, s) => sum + (s.memory_bytes ?? byDefault), 0),
      livingAgents: idle.filter((s) => this.o.containers.living.lives(s.workspace_id)).length,
    }
  }

  /** A queued task waits for a slot of `profileId`: an idle session holding one yields it. Whether one is being freed. */
  forSlot(profileId: string): boolean {
    return this.forQueued({ profile: profileId })
  }

  /** A queued task waits for its caller's cap: an idle session of the caller yields its share. Whether one is being freed. */
  forCaller(owner: string): boolean {
    return this.forQueued({ caller: owner })
  }

  /**
   * A submit found every slot of `profileId` taken: the longest-idle session holding one,
   * here or on another instance, is released, and the task waits in the queue for its
   * slot. False when every slot is held by a task under way (or an idle session already
   * going for another task): the submit is refused.
   */
  forSubmit(profileId: string): Promise<boolean> {
    const want = { profile: profileId }
    if (!this.o.shared) return Promise.resolve(this.releaseHere(keyOf(want), this.o.containers.idleSessions(), want))
    return this.ask(want)
  }

  /**
   * Tasks' claims wait for room in this instance's pool (the memory budget taken, or its
   * `max`): a parked warm agent gives its container back first, else the longest-idle
   * session of any caller, one at a time while a claim still waits.
   */
  forRoom(): void {
    const pool = this.o.engine?.pool
    if (!pool || pool.waiting === 0 || this.busy('room')) return
    const agents = this.o.engine?.warmAgents
    const idle = this.o.containers.idleSessions()
    if (idle.length === 0 && (agents?.stats().parked ?? 0) === 0) return
    this.begin('room')
    const freed = (async () => {
      if (await agents?.evictOne()) return true
      for (const s of idle) {
        const release = this.o.containers.yieldIdle(s.workspace_id)
        if (!release) continue
        this.o.logger.info('idle session released: a task waits for room in the pool', { workspace: s.workspace_id })
        await release
        return true
      }
      return false
    })()
    void freed
      .catch(() => false)
      .then((again) => {
        this.end('room')
        // Still waiting (a larger container, or several claims): the next one goes.
        if (again) this.forRoom()
      })
  }

  private forQueued(want: Want): boolean {
    const key = keyOf(want)
    if (this.busy(key)) return true
    if (!this.o.shared) return this.releaseHere(key, this.o.containers.idleSessions(), want)
    if ((this.quiet.get(key) ?? 0) > Date.now()) return false
    void this.ask(want)
    return true
  }

  /** Release the longest-idle session here that holds `want`, counted under `key` until it is done. */
  private releaseHere(key: string, idle: IdleSession[], want: Want): boolean {
    for (const s of idle) {
      if (!holds(s, want)) continue
      const release = this.o.containers.yieldIdle(s.workspace_id)
      if (!release) continue
      this.o.logger.info('idle session released: a task waits for what it holds', {
        workspace: s.workspace_id,
        for: key,
      })
      this.begin(key)
      void release.finally(() => this.end(key))
      return true
    }
    return false
  }

  /** Ask every instance for its longest-idle session holding `want`; the longest idle of all is released. Whether one is. */
  private async ask(want: Want): Promise<boolean> {
    const key = keyOf(want)
    this.begin(key)
    try {
      const idle = this.o.containers.idleSessions()
      const mine = idle.find((s) => holds(s, want))
      const theirs = await this.offers(want)
      if (mine && (!theirs || mine.idle_ms >= theirs.idle_ms)) return this.releaseHere(key, idle, want)
      if (!theirs?.ws) {
        this.quiet.set(key, Date.now() + QUIET_MS)
        if (this.quiet.size > 1_000) this.quiet.delete(this.quiet.keys().next().value!)
        return false
      }
      this.tell(key, theirs)
      return true
    } catch (err) {
      this.o.logger.warn('could not ask the other instances for an idle session', { for: key, error: String(err) })
      return false
    } finally {
      this.end(key)
    }
  }

  /** The other instances' offers for `want`: the longest idle, or null when none has one (or none answered in time). */
  private async offers(want: Want): Promise<Offer | null> {
    const { coordination } = this.o
    const me = coordination.instanceId
    const others = (await coordination.instances.alive()).filter((id) => id !== me).length
    if (others === 0) return null
    const id = randomUUID()
    const heard: Offer[] = []
    const all = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, OFFER_WAIT_MS)
      this.asks.set(id, (offer) => {
        heard.push(offer)
        if (heard.length < others) return
        clearTimeout(timer)
        resolve()
      })
    })
    try {
      await coordination.pubsub.publish<YieldMessage>(YIELD_CHANNEL, { ask: id, from: me, want })
      await all
    } finally {
      this.asks.delete(id)
    }
    return heard.filter((o) => o.ws).sort((a, b) => b.idle_ms - a.idle_ms)[0] ?? null
  }

  /** Tell the instance of `offer` to release its session; the release counts as under way until it says it is done. */
  private tell(key: string, offer: Offer): void {
    this.begin(key)
    let timer: ReturnType<typeof setTimeout> | undefined
    const end = () => {
      if (!this.told.delete(offer.offer)) return
      clearTimeout(timer)
      this.end(key)
    }
    this.told.set(offer.offer, end)
    timer = setTimeout(end, RELEASE_WAIT_MS)
    timer.unref?.()
    const me = this.o.coordination.instanceId
    void this.o.coordination.pubsub
      .publish<YieldMessage>(YIELD_CHANNEL, { award: offer.offer, to: offer.by, from: me, ws: offer.ws! })
      .catch(end)
  }

  /** Another instance's message: an ask to answer, an offer for an ask of ours, a release to make, or one made. */
  private heard(m: YieldMessage): void {
    const me = this.o.coordination.instanceId
    const publish = (reply: YieldMessage) =>
      void this.o.coordination.pubsub.publish(YIELD_CHANNEL, reply).catch((err: unknown) => {
        this.o.logger.warn('could not answer an ask for an idle session', { error: String(err) })
      })
    if ('ask' in m) {
      if (m.from === me) return
      const s = this.o.containers.idleSessions().find((x) => holds(x, m.want))
      publish({ offer: m.ask, to: m.from, by: me, ws: s?.workspace_id ?? null, idle_ms: s?.idle_ms ?? 0 })
    } else if ('offer' in m) {
      if (m.to === me) this.asks.get(m.offer)?.(m)
    } else if ('award' in m) {
      if (m.to !== me) return
      const release = this.o.containers.yieldIdle(m.ws)
      if (release)
        this.o.logger.info('idle session released: a task waits for it on another instance', { workspace: m.ws })
      void (release ?? Promise.resolve()).finally(() => publish({ released: m.award, to: m.from }))
    } else if (m.to === me) this.told.get(m.released)?.()
  }

  private busy(key: string): boolean {
    return (this.underWay.get(key) ?? 0) > 0
  }

  private begin(key: string): void {
    this.underWay.set(key, (this.underWay.get(key) ?? 0) + 1)
  }

  private end(key: string): void {
    const n = (this.underWay.get(key) ?? 0) - 1
    if (n > 0) this.underWay.set(key, n)
    else this.underWay.delete(key)
  }
}
