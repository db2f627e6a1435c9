import { CoordinationUnavailableError, type CoordinationChange, type CoordinationState } from '@berth/core'

/** Options of {@link redisHealth}. */
export interface RedisHealthOptions {
  /** The heartbeat lease (ms). */
  leaseMs: number
  /** How long before the lease would lapse this instance counts itself unleased (ms). */
  marginMs: number
  /** Told once per change to unreachable (not of every failed reconnect). */
  onError: (err: unknown) => void
}

/** What the driver reports to {@link redisHealth}, and what it reads back. */
export interface RedisHealth {
  state(): CoordinationState
  onStateChange(handler: (change: CoordinationChange) => void): () => void
  /** A connection failed or closed: unreachable (reported once until it is reachable again). */
  down(err: unknown): void
  /** A heartbeat sent at `sentAt` (epoch ms) succeeded; `reset` when the backend lost this deployment's state. */
  beat(sentAt: number, reset: boolean): void
  /** Throws {@link CoordinationUnavailableError} while unreachable. */
  check(): void
  close(): void
}

/**
 * The reachability and lease of one instance on Redis. Reachable from the first successful
 * heartbeat until a connection fails; leased until the last successful heartbeat's send time
 * plus the lease, less the margin, has passed. The lease is counted from when the beat was
 * sent (before Redis stamped its expiry), so this instance fences itself before any other can
 * see its heartbeat lapse.
 *
 * @example
 * ```ts
 * const health = redisHealth({ leaseMs: 30_000, marginMs: 5_000, onError: console.warn })
 * client.on('error', health.down)
 * health.beat(Date.now(), false)
 * ```
 */
export function redisHealth(o: RedisHealthOptions): RedisHealth {
  let state: CoordinationState = { reachable: false, leased: false, since: Date.now() }
  const handlers = new Set<(change: CoordinationChange) => void>()
  let fence: ReturnType<typeof setTimeout> | undefined

  const set = (next: Pick<CoordinationState, 'reachable' | 'leased'>, reset = false) => {
    if (next.reachable === state.reachable && next.leased === state.leased && !reset) return
    state = { ...next, since: Date.now() }
    for (const h of [...handlers]) {
      try {
        h({ ...state, reset })
      } catch (err) {
        o.onError(err)
      }
    }
  }

  return {
    state: () => state,
    onStateChange(handler) {
      handlers.add(handler)
      return () => handlers.delete(handler)
    },
    down(err) {
      if (!state.reachable) return
      o.onError(new CoordinationUnavailableError('coordination: Redis unreachable', { cause: err }))
      set({ reachable: false, leased: state.leased })
    },
    beat(sentAt, reset) {
      clearTimeout(fence)
      const left = sentAt + o.leaseMs - o.marginMs - Date.now()
      if (left <= 0) return set({ reachable: true, leased: false }, reset)
      fence = setTimeout(() => set({ reachable: state.reachable, leased: false }), left)
      fence.unref?.()
      set({ reachable: true, leased: true }, reset)
    },
    check() {
      if (!state.reachable) throw new CoordinationUnavailableError()
    },
    close() {
      clearTimeout(fence)
      handlers.clear()
    },
  }
}

/**
 * Run a coordination call within `timeoutMs`: while Redis is unreachable, or when the call
 * does not answer in time or fails on the connection, it rejects with
 * {@link CoordinationUnavailableError}; any other error (a script's, an argument's) stays what it is.
 *
 * @example
 * ```ts
 * const n = await bounded(health, 3000, () => client.incr('k'))
 * ```
 */
export function bounded<T>(health: RedisHealth, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  try {
    health.check()
  } catch (err) {
    return Promise.reject(err)
  }
  return withTimeout(timeoutMs, fn, () => !health.state().reachable)
}

/**
 * `fn` within `timeoutMs`, a connection failure (or any failure while `isDown()`) rejected as
 * {@link CoordinationUnavailableError}: what the heartbeat uses to probe an unreachable Redis.
 *
 * @example
 * ```ts
 * await withTimeout(3000, () => client.ping())
 * ```
 */
export function withTimeout<T>(timeoutMs: number, fn: () => Promise<T>, isDown = () => false): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new CoordinationUnavailableError(`coordination: no answer from Redis within ${timeoutMs} ms`)),
      timeoutMs,
    )
    fn().then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (err: unknown) => {
        clearTimeout(timer)
        if (err instanceof CoordinationUnavailableError || !(lostConnection(err) || isDown())) return reject(err)
        reject(new CoordinationUnavailableError(undefined, { cause: err }))
      },
    )
  })
}

/** ioredis' and Node's words for a connection that is gone or never answered. */
const CONNECTION_ERRORS =
  /Connection is closed|Stream isn't writeable|Command timed out|max retries|ECONNREFUSED|ECONNRESET|ENOENT|EPIPE|ETIMEDOUT/i

/** Whether `err` says the connection failed (rather than a script or an argument). */
function lostConnection(err: unknown): boolean {
  return err instanceof Error && (err.name === 'MaxRetriesPerRequestError' || CONNECTION_ERRORS.test(err.message))
}

/**
 * The object with each of `names` run through {@link bounded}.
 *
 * @example
 * ```ts
 * const q = boundedMethods(queue, ['add', 'take'], (fn) => bounded(health, 3000, fn))
 * ```
 */
export function boundedMethods<T extends object>(
  obj: T,
  names: readonly (keyof T)[],
  run: <R>(fn: () => Promise<R>) => Promise<R>,
): T {
  const out = { ...obj } as Record<keyof T, unknown>
  for (const name of names) {
    const fn = obj[name] as (...a: unknown[]) => Promise<unknown>
    out[name] = (...args: unknown[]) => run(() => fn.apply(obj, args))
  }
  return out as T
}
