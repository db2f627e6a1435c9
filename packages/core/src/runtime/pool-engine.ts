/** Whether the pool's engine answers: a bounded ping, and reconnecting with capped backoff while it does not. */
import type { ContainerRuntime } from '../ports/container-runtime.js'
import { ContainerError } from './errors.js'
import type { Logger } from '../ports/logger.js'
import type { EngineHealth } from '@berth/contract'
import { oneLine } from './pool-image.js'

/** `work`, or a rejection naming `what` after `ms` (an engine socket that accepts but never answers). */
async function within<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ContainerError('unreachable', `${what} did not answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([work, timeout])
  } finally {
    clearTimeout(timer)
  }
}

export interface EngineLinkOptions {
  runtime: ContainerRuntime
  logger: Logger
  /** First wait and cap between reconnect attempts, doubling between (default 1 s to 30 s). */
  retry?: { initialMs?: number; maxMs?: number } | undefined
  /** How long the engine gets to answer a ping (default 5 s). */
  pingTimeoutMs?: number | undefined
  /** Try to connect again (the wait is over); a failure calls {@link EngineLink.lost} again. */
  reconnect: () => void
}

/**
 * The pool's view of its engine: whether it answered last time, the last error once it
 * did not, and one pending reconnect at a time, waiting longer after each failure.
 *
 * @example
 * ```ts
 * const link = new EngineLink({ runtime, logger, reconnect: () => connect().catch((e) => link.lost(e)) })
 * await link.ping()
 * link.up()
 * ```
 */
export class EngineLink {
  private reachable = false
  private lastError: string | null = null
  private failures = 0
  private timer: ReturnType<typeof setTimeout> | null = null
  private closed = false

  constructor(private readonly o: EngineLinkOptions) {}

  /** Ping the engine; a socket that never answers rejects after `pingTimeoutMs`. */
  async ping(): Promise<void> {
    await within(this.o.runtime.ping(), this.o.pingTimeoutMs ?? 5_000, `the ${this.o.runtime.name} engine`)
  }

  /** The engine answered (and recovery ran): clear the error and the backoff. */
  up(): void {
    this.reachable = true
    this.lastError = null
    this.failures = 0
  }

  /** Known not to answer (before the first attempt, nothing is known). */
  get down(): boolean {
    return !this.reachable && this.lastError !== null
  }

  /** The last error, while the engine does not answer. */
  get error(): string | null {
    return this.lastError
  }

  /** Note that the engine does not answer and try again later (once; the retry reschedules itself). */
  lost(err: unknown): void {
    if (this.closed) return
    const wasUp = this.reachable
    this.reachable = false
    this.lastError = oneLine(err)
    if (this.timer) return
    const { initialMs = 1000, maxMs = 30_000 } = this.o.retry ?? {}
    const wait = Math.min(maxMs, initialMs * 2 ** this.failures++)
    this.o.logger.warn(wasUp ? 'container engine stopped answering' : 'container engine does not answer', {
      runtime: this.o.runtime.name,
      error: this.lastError,
      retry_in_ms: wait,
    })
    this.timer = setTimeout(() => {
      this.timer = null
      this.o.reconnect()
    }, wait)
    this.timer.unref?.()
  }

  /** The engine's state for `/health` (the pool adds its image's). */
  status(): Omit<EngineHealth, 'image'> {
    return {
      name: this.o.runtime.name,
      reachable: this.reachable,
      last_error: this.lastError ?? undefined,
    }
  }

  /** Stop reconnecting (the pool shuts down). */
  close(): void {
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
  }
}
