/** Rebuilding what the coordination backend holds from the store: on start, when it comes back empty, and slowly in between. */
import type { Logger } from '../ports/logger.js'
import type { Coordination } from './port.js'

/** One service's share of a rebuild. */
export interface RebuildPart {
  /**
   * Put back what the backend lost. `reset`: it came back empty (or this instance starts);
   * otherwise the slow reconcile, which touches only what has waited `olderThanMs` or more.
   */
  rebuild(opts: { reset: boolean; olderThanMs?: number }): Promise<unknown>
}

export interface CoordinationRebuildOptions {
  coordination: Coordination
  logger: Logger
  /** The parts by name (the name is what the log line calls what each did). */
  parts: Record<string, RebuildPart>
  /** What the reconcile leaves alone because it may still be on its way (default 60 s). */
  reconcileAfterMs?: number | undefined
}

/**
 * Redis holds nothing that cannot be rebuilt: the store keeps every record that matters
 * (queued tasks, pending delivery retries, used single-use keys), and this puts the
 * backend's side back from it. It runs on start, on every change of the coordination's
 * state with `reset` (the backend came back flushed, restarted empty or replaced), and every
 * `reconcileMs` for a loss no instance noticed. Each part is idempotent and safe with every
 * instance rebuilding at once; runs never overlap (a request during one runs after it).
 *
 * @example
 * ```ts
 * const rebuild = new CoordinationRebuild({ coordination, logger, parts: { tasks, notifications } })
 * await rebuild.start()
 * ```
 */
export class CoordinationRebuild {
  private running: Promise<void> | null = null
  private next: { reset: boolean; done: Promise<void> } | null = null
  private off: (() => void) | null = null
  private timer: ReturnType<typeof setInterval> | null = null
  private closed = false

  constructor(private readonly o: CoordinationRebuildOptions) {}

  /** Rebuild once now, then on every reset and every `reconcileMs` (default 30 s; null: never). */
  async start(opts: { reconcileMs?: number | null | undefined } = {}): Promise<void> {
    this.off = this.o.coordination.onStateChange((change) => {
      if (change.reset) void this.run({ reset: true })
    })
    const every = opts.reconcileMs === undefined ? 30_000 : opts.reconcileMs
    if (every !== null) {
      this.timer = setInterval(() => void this.run({ reset: false }), every)
      this.timer.unref?.()
    }
    await this.run({ reset: true })
  }

  /** One rebuild (after the one under way, if any); a part that fails is logged, the others still run. */
  run(opts: { reset: boolean }): Promise<void> {
    if (this.closed) return Promise.resolve()
    if (!this.running) {
      this.running = this.once(opts).finally(() => {
        this.running = null
      })
      return this.running
    }
    // Requests during a run make one more run after it; a reset among them wins over a reconcile.
    if (this.next) {
      this.next.reset ||= opts.reset
      return this.next.done
    }
    const next: { reset: boolean; done: Promise<void> } = { reset: opts.reset, done: Promise.resolve() }
    next.done = this.running.then(() => {
      this.next = null
      return this.run({ reset: next.reset })
    })
    this.next = next
    return next.done
  }

  close(): void {
    this.closed = true
    this.off?.()
    if (this.timer) clearInterval(this.timer)
  }

  private async once(opts: { reset: boolean }): Promise<void> {
    const olderThanMs = opts.reset ? undefined : (this.o.reconcileAfterMs ?? 60_000)
    const done: Record<string, unknown> = {}
    for (const [name, part] of Object.entries(this.o.parts)) {
      if (this.closed) return
      try {
        done[name] = await part.rebuild({ reset: opts.reset, olderThanMs })
      } catch (err) {
        this.o.logger.warn('could not rebuild the coordination state', { part: name, error: String(err) })
      }
    }
    if (opts.reset) this.o.logger.info('coordination state rebuilt from the store', done)
  }
}
