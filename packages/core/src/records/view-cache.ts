import type { Clock } from '../ports/clock.js'

/**
 * A small read cache of records' API views, per instance, keyed by store key. A write on
 * this instance drops its key at once; a write on another instance is seen here once the
 * entry is `ttlMs` old (the documented bound). A read that started before a drop never
 * stores its (possibly older) answer, so a drop is never undone by a slow read.
 */
export class ViewCache<V> {
  private readonly entries = new Map<string, { view: V; until: number }>()
  /** Bumped by every drop: a read begun under an older generation does not store its answer. */
  private generation = 0

  constructor(
    private readonly clock: Clock,
    /** How long an entry answers (ms); 0 turns the cache off. */
    private readonly ttlMs: number,
    /** At most this many entries; the oldest go first. */
    private readonly max = 1_000,
  ) {}

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

  /** Forget `key` (its record was written or deleted on this instance). */
  drop(key: string): void {
    this.generation++
    this.entries.delete(key)
  }
}
