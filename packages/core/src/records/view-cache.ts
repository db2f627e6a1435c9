import type { PubSub } from '../coordination/port.js'
import type { Clock } from '../ports/clock.js'

/** Where a cache tells the other instances which keys changed. */
export interface ViewCacheChannel {
  pubsub: PubSub
  /** The channel's name, one per kind of record (e.g. `view-cache:profiles`). */
  channel: string
}

/**
 * A small read cache of records' API views, per instance, keyed by store key. A write on
 * this instance drops its key at once and tells the other instances over `channel` (when
 * given), which drop it as the message arrives; an entry is never served once it is `ttlMs`
 * old, the bound when a message is lost (the coordination backend unreachable). A read that
 * started before a drop never stores its (possibly older) answer, so a drop is never undone
 * by a slow read.
 */
export class ViewCache<V> {
  private readonly entries = new Map<string, { view: V; until: number }>()
  /** Bumped by every drop: a read begun under an older generation does not store its answer. */
  private generation = 0
  private readonly unsubscribe: Promise<(() => Promise<void>) | undefined> | undefined

  constructor(
    private readonly clock: Clock,
    /** How long an entry answers (ms); 0 turns the cache off. */
    private readonly ttlMs: number,
    /** At most this many entries; the oldest go first. */
    private readonly max = 1_000,
    private readonly shared?: ViewCacheChannel,
  ) {
    // Without a subscription (the backend down at start) the bound still holds: ttlMs.
    this.unsubscribe =
      shared && ttlMs > 0
        ? shared.pubsub.subscribe<{ key: string }>(shared.channel, (m) => this.forget(m.key)).catch(() => undefined)
        : undefined
  }

  /** The view of `key` from the cache, or read by `load` (and kept when nothing dropped it meanwhile). */
  async read(key: string, load: () => Promise<V>): Promise<V> {
    if (this.ttlMs <= 0) return load()
    const now = this.clock.now()
    const hit = this.entries.get(key)
    if (hit && hit.until > now) return hit.view
    const generation = this.generation
    const view = await load()
    if (generation === this.generation) {
      this.entries.delete(key)
      if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!)
      // Shared by every later reader: frozen so no caller can change another's answer.
      this.entries.set(key, { view: Object.freeze(view), until: now + this.ttlMs })
    }
    return view
  }

  /** Forget `key` here and on the other instances (its record was written or deleted). */
  drop(key: string): void {
    this.forget(key)
    // A lost message leaves the other instances on the bound (ttlMs).
    if (this.shared && this.ttlMs > 0) this.shared.pubsub.publish(this.shared.channel, { key }).catch(() => {})
  }

  /** Stop listening to the other instances. */
  async close(): Promise<void> {
    await (await this.unsubscribe)?.().catch(() => {})
  }

  private forget(key: string): void {
    this.generation++
    this.entries.delete(key)
  }
}
