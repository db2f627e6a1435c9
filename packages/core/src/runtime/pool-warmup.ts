/** Keeping `min` containers warm: one creation at a time in the background, backing off when the engine fails. */
import type { Logger } from '../ports/logger.js'

export interface WarmUpOptions {
  /** Whether another warm container is wanted now (claims waiting come first). */
  wanted: () => boolean
  /** Create one warm container. */
  create: () => Promise<unknown>
  /** After a run (done or failed): let waiting claims move on. */
  done: () => void
  logger: Logger
}

/**
 * The pool's warm-up loop: {@link WarmUp.fill} starts one run unless one is under way or
 * waiting out a failure (1 s doubling to 30 s, so a broken engine is not hammered).
 *
 * @example
 * ```ts
 * const warm = new WarmUp({ wanted: () => idle < min, create: () => createContainer(), done: serve, logger })
 * warm.fill()
 * await warm.running
 * ```
 */
export class WarmUp {
  private filling: Promise<void> | null = null
  private failures = 0
  private retry: ReturnType<typeof setTimeout> | null = null

  constructor(private readonly o: WarmUpOptions) {}

  /** The run under way, if any (start and shutdown await it). */
  get running(): Promise<void> | null {
    return this.filling
  }

  /** Create warm containers until none is wanted, one at a time, in the background. */
  fill(): void {
    // Checked first: a run with nothing to do would finish synchronously, clearing `filling`
    // before it is assigned, and the stale promise would block every later warm-up.
    if (this.filling || this.retry || !this.o.wanted()) return
    this.filling = (async () => {
      try {
        while (this.o.wanted()) {
          await this.o.create()
          this.failures = 0
        }
      } catch (err) {
        // Back off (1 s doubling to 30 s) so a broken engine is not hammered.
        const wait = Math.min(30_000, 1000 * 2 ** this.failures++)
        this.o.logger.warn('could not warm a container', { error: String(err), retry_in_ms: wait })
        this.retry = setTimeout(() => {
          this.retry = null
          this.fill()
        }, wait)
        this.retry.unref?.()
      } finally {
        this.filling = null
      }
      this.o.done()
    })()
  }

  /** Stop retrying after a failure (the pool shuts down). */
  stop(): void {
    if (this.retry) clearTimeout(this.retry)
  }
}
