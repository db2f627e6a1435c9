/** Whether this instance can take tasks now (`GET /health/ready`), and the store and coordination parts of `/health`. */
import { ApiError, type CoordinationHealth, type ReadinessChecks, type StoreHealth } from '@berth/contract'
import type { Coordination } from './coordination/port.js'
import type { Store } from './ports/store.js'
import type { Services } from './services.js'
import type { EngineHealth } from '@berth/contract'

/** How long a store ping may take before the store counts as unreachable. */
const PING_TIMEOUT_MS = 2_000

export interface InstanceReadinessOptions {
  store: Store
  coordination: Coordination
  /** The pool, whose engine status counts when a container runtime is configured. */
  pool: { engineStatus(): EngineHealth | null }
}

/**
 * Readiness for load balancers and probes: ready while the store answers, the coordination
 * backend is reachable and this instance holds its lease, it is not draining, and its
 * container engine (when it has one) answers.
 *
 * @example
 * ```ts
 * const readiness = new InstanceReadiness({ store, coordination, pool })
 * const { ready, checks } = await readiness.check()
 * ```
 */
export class InstanceReadiness {
  private draining = false
  private storeError: string | undefined

  constructor(private readonly o: InstanceReadinessOptions) {}

  /** From now on the instance is not ready (SIGTERM: the load balancer stops sending it work). */
  drain(): void {
    this.draining = true
  }

  /** The store as `/health` shows it (one ping). */
  async store(): Promise<StoreHealth> {
    const { store } = this.o
    let reachable = true
    try {
      if (store.ping) await withTimeout(store.ping(), PING_TIMEOUT_MS)
      this.storeError = undefined
    } catch (err) {
      reachable = false
      this.storeError = err instanceof Error ? err.message : String(err)
    }
    const health: StoreHealth = { driver: store.driver ?? 'custom', reachable }
    if (!reachable && this.storeError) health.last_error = this.storeError
    return health
  }

  /** The coordination as `/health` shows it (no I/O). */
  coordination(): CoordinationHealth {
    const { reachable, leased } = this.o.coordination.state()
    return { driver: this.o.coordination.driver, reachable, leased }
  }

  /** Each check, and whether all pass. */
  async check(): Promise<{ ready: boolean; checks: ReadinessChecks }> {
    const coordination = this.coordination()
    const engine = this.o.pool.engineStatus()
    const checks: ReadinessChecks = {
      store: (await this.store()).reachable,
      coordination: coordination.reachable && coordination.leased,
      engine: engine ? engine.reachable : true,
      draining: !this.draining,
    }
    return { ready: Object.values(checks).every(Boolean), checks }
  }

  /** The 200 answer, or throws 503 SERVICE_UNAVAILABLE with the checks in `details`. */
  async answer(): Promise<{ ready: true; checks: ReadinessChecks }> {
    const { ready, checks } = await this.check()
    if (ready) return { ready, checks }
    const failing = Object.entries(checks)
      .filter(([, ok]) => !ok)
      .map(([name]) => name)
    throw new ApiError(
      'SERVICE_UNAVAILABLE',
      `Not ready: ${failing.join(', ')}`,
      { checks, retry_after: 5 },
      { 'retry-after': '5' },
    )
  }
}

/** One readiness per services object (its draining flag lives as long as they do). */
const byServices = new WeakMap<object, InstanceReadiness>()

/**
 * The readiness of an instance's services (made on first use).
 *
 * @example
 * ```ts
 * readinessOf(berth.services).drain() // SIGTERM: /health/ready answers 503 from now on
 * ```
 */
export function readinessOf(services: Pick<Services, 'tasks' | 'coordination' | 'pool'>): InstanceReadiness {
  let r = byServices.get(services)
  if (!r) {
    r = new InstanceReadiness({
      store: services.tasks.recordsStore,
      coordination: services.coordination,
      pool: services.pool,
    })
    byServices.set(services, r)
  }
  return r
}

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  return Promise.race([
    p,
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}
