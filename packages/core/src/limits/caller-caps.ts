/** Per-caller caps: how many workspaces one caller may hold containers for at once, over every instance. */
import type { Slots } from '../coordination/port.js'
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { ConcurrencySlots } from './concurrency.js'

/** A caller's caps: running workspaces at most, and the share of the pool (0–1]; `null`: no cap of that kind. */
export interface CallerCapSettings {
  maxRunning: number | null
  poolShare: number | null
}

/** A caller's own caps as the operator set them (`null`: the operator's default applies). */
export interface CallerCapOverride {
  max_running: number | null
  pool_share: number | null
}

export interface CallerCapsOptions {
  store: Store
  clock: Clock
  /** The operator's defaults (default: no caps). */
  defaults?: Partial<CallerCapSettings> | undefined
  /** The pool's size (`max`) a share is taken of; none: shares do not apply. */
  poolMax?: () => number | undefined
  /** Counted over every instance through these shared slots (default: this process only). */
  slots?: Slots | undefined
}

/** How long a caller's override read from the store is trusted (it is set on another instance, perhaps). */
const OVERRIDE_TTL_MS = 5_000

const overrideKey = (owner: string) => `caller-limits:${owner}`

/**
 * The caps on what one caller holds at once, so that one caller with many profiles cannot
 * take the whole pool: at most `maxRunning` workspaces holding a container (a task under way
 * or a warm session), and at most `poolShare` of the pool's containers; the tighter of the
 * two holds (a share always leaves at least one). A workspace takes its caller's slot when
 * its task is about to start and gives it back with its container, through the
 * coordination's slots (`caller:<id>`), so the cap holds over the sum of instances. A task
 * over its caller's cap waits in the queue (see `Scheduler`); operators override the
 * defaults per caller (`PUT /admin/users/:id/limits`).
 *
 * @example
 * ```ts
 * const caps = new CallerCaps({ store, clock, defaults: { poolShare: 0.5 }, poolMax: () => 20 })
 * await caps.tryTake('usr_1', 'ws_1') // false once usr_1 holds 10 workspaces
 * caps.release('usr_1', 'ws_1')
 * ```
 */
export class CallerCaps {
  /** The slots, one key per caller, each with its caller's own limit. */
  private readonly slots: ConcurrencySlots
  private readonly overrides = new Map<string, { value: CallerCapOverride | null; at: number }>()

  constructor(private readonly o: CallerCapsOptions) {
    this.slots = new ConcurrencySlots(Number.MAX_SAFE_INTEGER, o.slots && { slots: o.slots }, { prefix: 'caller' })
  }

  /** The operator's defaults. */
  get defaults(): CallerCapSettings {
    return { maxRunning: this.o.defaults?.maxRunning ?? null, poolShare: this.o.defaults?.poolShare ?? null }
  }

  /** The caps that hold for `owner` now (its override as last read, else the defaults). */
  settingsOf(owner: string): CallerCapSettings {
    const own = this.overrides.get(owner)?.value
    const d = this.defaults
    return { maxRunning: own?.max_running ?? d.maxRunning, poolShare: own?.pool_share ?? d.poolShare }
  }

  /** How many workspaces `owner` may hold at once (`Number.MAX_SAFE_INTEGER`: no cap). */
  limitOf(owner: string): number {
    const { maxRunning, poolShare } = this.settingsOf(owner)
    const max = this.o.poolMax?.()
    const share = poolShare !== null && max !== undefined ? Math.max(1, Math.floor(poolShare * max)) : null
    return Math.min(maxRunning ?? Number.MAX_SAFE_INTEGER, share ?? Number.MAX_SAFE_INTEGER)
  }

  /** Workspaces of `owner` holding a slot here. */
  running(owner: string): number {
    return this.slots.running(owner)
  }

  has(owner: string, wsId: string): boolean {
    return this.slots.has(owner, wsId)
  }

  /** Whether `owner` is at its cap as this instance knows it (other instances may hold more). */
  atCap(owner: string): boolean {
    return this.running(owner) >= this.limitOf(owner)
  }

  /** Take `owner`'s slot for `wsId`, counted over every instance; false when the caller is at its cap. */
  async tryTake(owner: string, wsId: string): Promise<boolean> {
    await this.refresh(owner)
    return this.slots.tryTake(owner, wsId, this.limitOf(owner))
  }

  /** Hold a slot this process knows the workspace has (restart recovery, a rebuild), whatever the cap. */
  adopt(owner: string, wsId: string): void {
    this.slots.adopt(owner, wsId)
  }

  /** Take again, in the shared slots, every slot held here (the backend lost its state). How many. */
  reassert(): number {
    return this.slots.reassert()
  }

  /** The workspace gave its container back. */
  release(owner: string, wsId: string): void {
    this.slots.release(owner, wsId)
  }

  /** Free a slot whatever instance held it (that instance is gone). */
  releaseShared(owner: string, wsId: string): Promise<void> {
    return this.slots.releaseShared(owner, wsId)
  }

  /** Stop renewing leases. */
  close(): void {
    this.slots.close()
  }

  /** Why a task of `owner` waits: a sentence for the task view. */
  describe(owner: string): string {
    const { maxRunning, poolShare } = this.settingsOf(owner)
    const limit = this.limitOf(owner)
    const why =
      maxRunning === limit ? `max_running ${maxRunning}` : `pool_share ${poolShare} of ${this.o.poolMax?.()} containers`
    return `The caller holds ${limit} running workspaces, its cap (${why}); the task starts when one of them ends`
  }

  /** The caller's own caps (`null` fields: the default applies). */
  async get(owner: string): Promise<CallerCapOverride> {
    return (await this.read(owner)) ?? { max_running: null, pool_share: null }
  }

  /** Set (or clear with nulls) a caller's own caps. */
  async set(owner: string, caps: CallerCapOverride): Promise<CallerCapOverride> {
    if (caps.max_running === null && caps.pool_share === null) await this.o.store.remove(overrideKey(owner))
    else await this.o.store.set(overrideKey(owner), caps)
    this.overrides.set(owner, { value: caps, at: this.o.clock.now() })
    return caps
  }

  /** Read the caller's override again when the one known is old. */
  private async refresh(owner: string): Promise<void> {
    const known = this.overrides.get(owner)
    if (known && this.o.clock.now() - known.at < OVERRIDE_TTL_MS) return
    await this.read(owner)
  }

  private async read(owner: string): Promise<CallerCapOverride | null> {
    const value = await this.o.store.get<CallerCapOverride>(overrideKey(owner))
    // Forget the oldest caller when many were read (a Map keeps insertion order).
    this.overrides.delete(owner)
    this.overrides.set(owner, { value, at: this.o.clock.now() })
    if (this.overrides.size > 10_000) this.overrides.delete(this.overrides.keys().next().value!)
    return value
  }
}
