import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import { ApiError, notFound } from '../errors.js'
import { newId } from '../ids.js'
import { isoNow, type Clock } from '../ports/clock.js'
import { IDLE_COMMAND, MANAGED_LABEL, type ContainerRuntime, type ContainerSpec, type ImageRecipe } from '../ports/container-runtime.js'
import { ContainerError, isContainerError } from './errors.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { EngineHealth, PoolStats } from '../schemas/health.js'
import { PoolImage, oneLine } from './pool-image.js'

/** Claim priority; higher priorities are served first when the pool is full. */
export type Priority = 'low' | 'normal' | 'high'
const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 }

/** A container the pool manages, as persisted (so a restarted server can account for it). */
export interface PooledContainer {
  /** Berth's id (`ctr_…`), also the `berth.container` label. */
  id: string
  engine_id: string
  state: 'idle' | 'in_use'
  owner_id: string | null
  workspace_id: string | null
  purpose: 'batch' | 'session' | null
  created_at: string
  claimed_at: string | null
}

/** A claimed container. Release it when done: batch containers are reaped. */
export interface Lease {
  container: PooledContainer
  /** Give the container back: it is removed (reaped), never reused by another caller. */
  release(): Promise<void>
}

export interface ClaimRequest {
  owner_id: string
  workspace_id?: string | null
  purpose: 'batch' | 'session'
  priority?: Priority
  /**
   * A dedicated container (e.g. with the workspace's volume) instead of a warm one: it is
   * created for this claim and counts toward `max` like any other.
   */
  spec?: Partial<ContainerSpec>
  /** Labels for a dedicated container (warm ones get theirs at creation). */
  labels?: Record<string, string>
  signal?: AbortSignal
}

export interface PoolOptions {
  runtime: ContainerRuntime
  store: Store
  clock: Clock
  logger: Logger
  /** Image every pooled container starts from. */
  image: string
  /** Idle containers kept warm. */
  min: number
  /** Containers at most, idle and in use together. */
  max: number
  /**
   * Pool name: the `berth.pool` label. Recovery only touches containers carrying it, so
   * servers sharing an engine need different names (see {@link defaultPoolName}).
   */
  name?: string
  /**
   * How to build the image when the engine lacks it and no registry has it (e.g.
   * `hostImageRecipe()` from `@berth/adapter-docker`). Without one, a missing image that
   * cannot be pulled fails container creation with CONTAINER_FAILED.
   */
  imageRecipe?: ImageRecipe
  /** Reconnecting to an engine that does not answer: first wait and cap, doubling between (default 1 s to 30 s). */
  retry?: { initialMs?: number; maxMs?: number }
  /** How long the engine gets to answer a ping before it counts as down (default 5 s). */
  pingTimeoutMs?: number
  /** Spec fields every container gets: limits, network, the runner's read-only mount, env. */
  spec?: Partial<ContainerSpec>
  /**
   * At start, decides whether an in-use container found on the engine is still needed
   * (e.g. its session workspace is alive). Unaccounted containers are removed.
   */
  adopt?: (container: PooledContainer) => Promise<boolean>
}

/**
 * The default pool name for a data directory: `berth-` and 8 hex digits of its absolute
 * path's hash, so two servers with their own data on one engine never share a pool.
 *
 * @example
 * ```ts
 * defaultPoolName('/var/lib/berth') // 'berth-1c0e5f2a' (stable for that path)
 * ```
 */
export function defaultPoolName(dataDir: string): string {
  return `berth-${createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 8)}`
}

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

interface Waiter {
  req: ClaimRequest
  seq: number
  resolve: (lease: Lease) => void
  reject: (err: unknown) => void
}

/**
 * The warm container pool: keeps `min` idle containers ready, up to `max` in all; a claim
 * takes a warm one (no engine call) or creates one; when `max` is reached, claims wait in
 * a fair queue (priority first, then the owner holding fewest containers, then arrival).
 * Released containers are reaped and replaced. Every container carries `berth.*` labels
 * and a persisted record, so a restarted server adopts what it can account for and
 * removes the rest. The image is provisioned (present, pulled, or built from
 * `imageRecipe`) once, before the first container. An engine that does not answer is
 * retried with capped backoff until it does; meanwhile claims fail fast.
 *
 * @example
 * ```ts
 * const pool = new ContainerPool({ runtime, store, clock, logger, image: 'berth-runner', min: 2, max: 20 })
 * await pool.start()
 * const lease = await pool.claim({ owner_id: caller.id, purpose: 'batch' })
 * try { await runtime.exec(lease.container.engine_id, { cmd: ['node', '-v'] }) } finally { await lease.release() }
 * ```
 */
export class ContainerPool {
  private readonly o: Required<Pick<PoolOptions, 'name'>> & PoolOptions
  private readonly containers = new Map<string, PooledContainer>()
  private readonly waiters: Waiter[] = []
  private creating = 0
  private seq = 0
  private closed = false
  private filling: Promise<void> | null = null
  private fillFailures = 0
  private fillRetry: ReturnType<typeof setTimeout> | null = null
  /** Whether the engine answered last time we asked; `lastError` once it did not. */
  private engine: { reachable: boolean; lastError: string | null } = { reachable: false, lastError: null }
  /** Recovery ran (it needs the engine): until then, a reconnect recovers first. */
  private recovered = false
  private reconnectFailures = 0
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null
  /** The image every creation from `image` awaits (provisioned once). */
  private readonly image: PoolImage

  constructor(opts: PoolOptions) {
    if (!(opts.min >= 0 && opts.max >= 0 && opts.min <= opts.max)) throw new Error(`pool needs 0 <= min <= max, got min ${opts.min}, max ${opts.max}`)
    this.o = { name: 'default', ...opts }
    this.image = new PoolImage({
      runtime: opts.runtime,
      ref: opts.image,
      recipe: opts.imageRecipe,
      logger: opts.logger,
      onUnreachable: (err) => this.engineDown(err),
    })
  }

  /** The pool's name, its `berth.pool` label (the workspace volumes it mounts carry it too). */
  get name(): string {
    return this.o.name
  }

  private key(id: string): string {
    return `pool:${this.o.name}:${id}`
  }

  private get idle(): PooledContainer[] {
    return [...this.containers.values()].filter((c) => c.state === 'idle')
  }

  /** `{ min, max, in_use, idle }`: containers being created count as neither. */
  stats(): PoolStats {
    let inUse = 0
    for (const c of this.containers.values()) if (c.state === 'in_use') inUse++
    return { min: this.o.min, max: this.o.max, in_use: inUse, idle: this.containers.size - inUse }
  }

  /** Every container the pool holds, oldest first. */
  list(): PooledContainer[] {
    return [...this.containers.values()].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))
  }

  /** Known not to answer (before the first attempt, nothing is known). */
  private get down(): boolean {
    return !this.engine.reachable && this.engine.lastError !== null
  }

  /** The engine's state for `/health`: its name, whether it answers, the last error, the image's state. */
  engineStatus(): EngineHealth {
    const image = this.image.status()
    return {
      name: this.o.runtime.name,
      reachable: this.engine.reachable,
      ...(this.engine.lastError !== null && { last_error: this.engine.lastError }),
      ...(image && { image }),
    }
  }

  get(id: string): PooledContainer {
    const c = this.containers.get(id)
    if (!c) throw notFound('container', id)
    return c
  }

  /**
   * Recover what a previous run left, then provision the image and warm up to `min`. When
   * the engine does not answer, rejects (CONTAINER_FAILED) and keeps retrying recovery
   * and warm-up in the background, with capped exponential backoff, until it does.
   */
  async start(): Promise<{ adopted: number; removed: number }> {
    let result: { adopted: number; removed: number }
    try {
      result = await this.connect()
    } catch (err) {
      this.engineDown(err)
      throw err
    }
    this.afterConnect()
    await this.filling
    return result
  }

  /** Ping (bounded), then recover once. */
  private async connect(): Promise<{ adopted: number; removed: number }> {
    await within(this.o.runtime.ping(), this.o.pingTimeoutMs ?? 5_000, `the ${this.o.runtime.name} engine`)
    const result = this.recovered ? { adopted: 0, removed: 0 } : await this.recover()
    this.recovered = true
    this.engine = { reachable: true, lastError: null }
    this.reconnectFailures = 0
    return result
  }

  /** The engine answers: provision the image in the background, warm up, serve waiting claims. */
  private afterConnect(): void {
    this.track(this.image.ready()) // failures are logged and shown in /health; creations try again
    this.fill()
    this.serveWaiters()
  }

  /** Note that the engine does not answer and try again later (once; the retry reschedules itself). */
  private engineDown(err: unknown): void {
    if (this.closed) return
    const wasUp = this.engine.reachable
    this.engine = { reachable: false, lastError: oneLine(err) }
    if (this.reconnectTimer) return
    const { initialMs = 1000, maxMs = 30_000 } = this.o.retry ?? {}
    const wait = Math.min(maxMs, initialMs * 2 ** this.reconnectFailures++)
    this.o.logger.warn(wasUp ? 'container engine stopped answering' : 'container engine does not answer', {
      runtime: this.o.runtime.name,
      error: this.engine.lastError,
      retry_in_ms: wait,
    })
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null
      const attempt = this.connect().then(
        ({ adopted, removed }) => {
          if (this.closed) return
          this.o.logger.info('container engine answers', { runtime: this.o.runtime.name, adopted, removed })
          this.afterConnect()
        },
        (e) => this.engineDown(e),
      )
      this.track(attempt)
    }, wait)
    this.reconnectTimer.unref?.()
  }

  /**
   * Match the engine's containers (by label) with the persisted records: adopt idle ones
   * that still run and in-use ones `adopt` vouches for; remove every other container and
   * drop records whose container is gone.
   */
  async recover(): Promise<{ adopted: number; removed: number }> {
    const found = await this.o.runtime.list({ labels: { [MANAGED_LABEL]: 'true', 'berth.pool': this.o.name }, all: true })
    const keys = await this.o.store.keys(`pool:${this.o.name}:`)
    const records = new Map(
      (await this.o.store.getMany<PooledContainer>(keys)).filter((r): r is PooledContainer => r !== null).map((r) => [r.id, r]),
    )
    let adopted = 0
    let removed = 0
    for (const summary of found) {
      const record = records.get(summary.labels['berth.container'] ?? '')
      records.delete(record?.id ?? '')
      const alive = summary.state === 'running'
      const keep =
        record !== undefined &&
        record.engine_id === summary.id &&
        alive &&
        (record.state === 'idle' || (this.o.adopt ? await this.o.adopt(record).catch(() => false) : false))
      if (keep) {
        this.containers.set(record.id, record)
        adopted++
        continue
      }
      await this.o.runtime.remove(summary.id).catch((err) => this.o.logger.warn('could not remove orphan container', { id: summary.id, error: String(err) }))
      if (record) await this.o.store.remove(this.key(record.id))
      removed++
    }
    for (const stale of records.values()) await this.o.store.remove(this.key(stale.id))
    if (adopted || removed) this.o.logger.info('pool recovered', { pool: this.o.name, adopted, removed })
    return { adopted, removed }
  }

  /**
   * A container for a task. Warm when one is idle and no dedicated spec is asked for;
   * otherwise created now; when the pool is full, the claim waits its turn (abortable).
   */
  claim(req: ClaimRequest): Promise<Lease> {
    if (this.closed) return Promise.reject(new ApiError('CONTAINER_FAILED', 'The container pool is shut down'))
    if (req.signal?.aborted) return Promise.reject(req.signal.reason)
    if (this.down) {
      const name = this.o.runtime.name
      return Promise.reject(
        new ContainerError('unreachable', `The ${name} engine is not answering (${this.engine.lastError}); Berth keeps retrying in the background`, { runtime: name }),
      )
    }
    if (this.waiters.length === 0) {
      const lease = this.tryClaim(req)
      if (lease) return lease
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = { req, seq: this.seq++, resolve, reject }
      this.waiters.push(waiter)
      // Capacity may be free already (earlier waiters were waiting on a creation).
      queueMicrotask(() => this.serveWaiters())
      req.signal?.addEventListener(
        'abort',
        () => {
          const i = this.waiters.indexOf(waiter)
          if (i >= 0) {
            this.waiters.splice(i, 1)
            reject(req.signal!.reason)
          }
        },
        { once: true },
      )
    })
  }

  /** A lease now (warm, or a creation under way), or `null` when the pool is full. */
  private tryClaim(req: ClaimRequest): Promise<Lease> | null {
    if (!req.spec) {
      const warm = this.idle[0]
      if (warm) {
        const lease = this.lease(warm, req)
        this.fill()
        return lease
      }
    }
    if (this.containers.size + this.creating < this.o.max) {
      return this.create(req).then((c) => {
        // Creations for claims counted toward the warm-up meanwhile; warm up for real now.
        const lease = this.lease(c, req)
        this.fill()
        return lease
      })
    }
    return null
  }

  private async lease(c: PooledContainer, req: ClaimRequest): Promise<Lease> {
    c.state = 'in_use'
    c.owner_id = req.owner_id
    c.workspace_id = req.workspace_id ?? null
    c.purpose = req.purpose
    c.claimed_at = isoNow(this.o.clock)
    await this.o.store.set(this.key(c.id), c)
    return this.leaseOf(c.id)
  }

  /** Engine work under way (creations, removals): shutdown waits for it. */
  private readonly inflight = new Set<Promise<unknown>>()

  private track(work: Promise<unknown>): void {
    const tracked = work.catch(() => undefined).finally(() => this.inflight.delete(tracked))
    this.inflight.add(tracked)
  }

  private create(req?: ClaimRequest): Promise<PooledContainer> {
    const made = this.createNow(req)
    this.track(made)
    return made
  }

  private async createNow(req?: ClaimRequest): Promise<PooledContainer> {
    this.creating++
    const id = newId('container')
    try {
      const base = this.o.spec ?? {}
      const spec: ContainerSpec = {
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        ...base,
        ...req?.spec,
        image: req?.spec?.image ?? this.o.image,
        mounts: [...(base.mounts ?? []), ...(req?.spec?.mounts ?? [])],
        env: { ...base.env, ...req?.spec?.env },
        labels: {
          ...base.labels,
          ...req?.spec?.labels,
          ...req?.labels,
          [MANAGED_LABEL]: 'true',
          'berth.pool': this.o.name,
          'berth.container': id,
          ...(req && { 'berth.owner': req.owner_id }),
          ...(req?.workspace_id && { 'berth.workspace': req.workspace_id }),
        },
      }
      if (spec.image === this.o.image) await this.image.ready()
      let engineId: string
      try {
        engineId = (await this.o.runtime.create(spec)).id
      } catch (err) {
        // Removed since it was provisioned: provision again next time.
        if (isContainerError(err, 'not_found') && spec.image === this.o.image) this.image.invalidate()
        if (isContainerError(err, 'unreachable')) this.engineDown(err)
        throw err
      }
      try {
        await this.o.runtime.start(engineId)
        // Shut down meanwhile: nobody will release this one, so it must not outlive us.
        if (this.closed) throw new ApiError('CONTAINER_FAILED', 'The container pool is shut down')
      } catch (err) {
        await this.o.runtime.remove(engineId).catch(() => {})
        throw err
      }
      const record: PooledContainer = {
        id,
        engine_id: engineId,
        // Made for a claim: in use at once, so no other claim (nor the warm-up count) takes
        // it in the moment before `lease` records its holder.
        state: req ? 'in_use' : 'idle',
        owner_id: null,
        workspace_id: null,
        purpose: null,
        created_at: isoNow(this.o.clock),
        claimed_at: null,
      }
      await this.o.store.set(this.key(id), record)
      this.containers.set(id, record)
      return record
    } finally {
      this.creating--
    }
  }

  /** Remove a container (released, or forced) and let the queue and the warm set move on. */
  private async reap(id: string): Promise<void> {
    const c = this.containers.get(id)
    if (!c) return
    this.containers.delete(id)
    const removal = this.o.runtime.remove(c.engine_id).catch((err) => this.o.logger.warn('could not remove container', { id, error: String(err) }))
    this.track(removal)
    await removal
    await this.o.store.remove(this.key(id))
    this.serveWaiters()
    this.fill()
  }

  /** The lease of an in-use container: release reaps it, once. Also for containers adopted at start. */
  leaseOf(id: string): Lease {
    const c = this.get(id)
    let released = false
    return {
      container: c,
      release: async () => {
        if (released) return
        released = true
        await this.reap(c.id)
      },
    }
  }

  /** Record the workspace an in-use container now serves (a warm agent handed to a task), so a restart accounts for it. */
  async assign(id: string, workspaceId: string): Promise<void> {
    const c = this.get(id)
    c.workspace_id = workspaceId
    await this.o.store.set(this.key(c.id), c)
  }

  /** Admin force-remove: 404 for an unknown id. A holder of the lease sees CONTAINER_FAILED. */
  async forceRemove(id: string): Promise<void> {
    this.get(id)
    await this.reap(id)
  }

  /** Hand capacity to waiting claims, best first. */
  private serveWaiters(): void {
    while (this.waiters.length && !this.closed) {
      const next = this.nextWaiter()
      const lease = this.tryClaim(next.req)
      if (!lease) return
      this.waiters.splice(this.waiters.indexOf(next), 1)
      lease.then(next.resolve, (err) => {
        next.reject(err)
        this.serveWaiters()
      })
    }
  }

  /** Priority first; then the owner holding the fewest containers; then arrival. */
  private nextWaiter(): Waiter {
    const held = new Map<string, number>()
    for (const c of this.containers.values()) if (c.owner_id) held.set(c.owner_id, (held.get(c.owner_id) ?? 0) + 1)
    return this.waiters.reduce((best, w) => {
      const a = [RANK[w.req.priority ?? 'normal'], held.get(w.req.owner_id) ?? 0, w.seq]
      const b = [RANK[best.req.priority ?? 'normal'], held.get(best.req.owner_id) ?? 0, best.seq]
      for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? w : best
      return best
    })
  }

  /** Whether warming should create another container now (claims waiting come first). */
  private wantsWarm(): boolean {
    return !this.closed && !this.down && this.waiters.length === 0 && this.idle.length + this.creating < this.o.min && this.containers.size + this.creating < this.o.max
  }

  /** Create warm containers until `min` are idle (within `max`), one at a time, in the background. */
  private fill(): void {
    // Checked first: a run with nothing to do would finish synchronously, clearing `filling`
    // before it is assigned, and the stale promise would block every later warm-up.
    if (this.filling || this.fillRetry || !this.wantsWarm()) return
    this.filling = (async () => {
      try {
        while (this.wantsWarm()) {
          await this.create()
          this.fillFailures = 0
        }
      } catch (err) {
        // Back off (1 s doubling to 30 s) so a broken engine is not hammered.
        const wait = Math.min(30_000, 1000 * 2 ** this.fillFailures++)
        this.o.logger.warn('could not warm a container', { error: String(err), retry_in_ms: wait })
        this.fillRetry = setTimeout(() => {
          this.fillRetry = null
          this.fill()
        }, wait)
        this.fillRetry.unref?.()
      } finally {
        this.filling = null
      }
      this.serveWaiters()
    })()
  }

  /**
   * Stop: waiting claims fail with CONTAINER_FAILED. Containers stay on the engine (a
   * restart adopts them) unless `removeAll` is set.
   */
  async close(opts: { removeAll?: boolean } = {}): Promise<void> {
    this.closed = true
    if (this.fillRetry) clearTimeout(this.fillRetry)
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer)
    for (const w of this.waiters.splice(0)) w.reject(new ApiError('CONTAINER_FAILED', 'The container pool is shut down'))
    await this.filling
    await Promise.all(this.inflight)
    if (opts.removeAll) for (const id of [...this.containers.keys()]) await this.reap(id)
  }
}
