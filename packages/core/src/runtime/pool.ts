/** The warm container pool: claims, leases and reaping, over the engine link, warm-up, fair queue and recovery beside it. */
import { ApiError, notFound, newId, type EngineHealth, type PoolStats } from '@berth/contract'
import { isoNow } from '../ports/clock.js'
import { secondsFrom } from '../ports/metrics.js'
import { ContainerError } from './errors.js'
import { EngineLink } from './pool-engine.js'
import { PoolImage } from './pool-image.js'
import { poolKey, type ClaimRequest, type Lease, type PooledContainer, type PoolOptions } from './pool-options.js'
import { ClaimQueue } from './pool-queue.js'
import { MemoryBudget } from './pool-memory.js'
import { recoverPool } from './pool-recovery.js'
import { createContainer, specHash, type CreateContext } from './pool-create.js'
import { WarmUp } from './pool-warmup.js'

/**
 * The warm container pool: keeps `min` idle containers ready, up to `max` in all; a claim takes a
 * warm one (no engine call) or creates one; at `max`, claims wait in a fair queue (priority,
 * then the owner holding fewest containers, then arrival). Released containers are reaped and
 * replaced. Every container carries `berth.*` labels and a persisted record, so a restarted
 * server adopts what it can account for and removes the rest. The image is provisioned
 * (present, pulled, or built from `imageRecipe`) once, before the first container. An engine
 * that does not answer is retried with capped backoff; meanwhile claims fail fast.
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
  private readonly queue = new ClaimQueue()
  private creating = 0
  /** The memory caps of the containers being created. */
  private creatingBytes = 0
  /** The host's memory budget the containers' caps are admitted against (null: none). */
  readonly memoryBudget: MemoryBudget | null
  private closed = false
  /** Recovery ran (it needs the engine): until then, a reconnect recovers first. */
  private recovered = false
  /** Whether the engine answers, and reconnecting while it does not. */
  private readonly engine: EngineLink
  private readonly warm: WarmUp
  /** The image every creation from `image` awaits (provisioned once). */
  private readonly image: PoolImage
  /** What creating a container needs (see {@link createContainer}). */
  private readonly creation: CreateContext

  constructor(opts: PoolOptions) {
    if (!(opts.min >= 0 && opts.max >= 0 && opts.min <= opts.max))
      throw new Error(`pool needs 0 <= min <= max, got min ${opts.min}, max ${opts.max}`)
    this.o = { name: 'default', ...opts }
    this.memoryBudget = opts.memoryBudgetBytes ? new MemoryBudget(opts.memoryBudgetBytes, opts.spec) : null
    opts.metrics?.watchPool(() => this.stats())
    this.engine = new EngineLink({ ...opts, reconnect: () => this.reconnect() })
    this.warm = new WarmUp({
      wanted: () => this.wantsWarm(),
      create: () => this.create(),
      done: () => this.serveWaiters(),
      logger: opts.logger,
    })
    this.image = new PoolImage({
      runtime: opts.runtime,
      ref: opts.image,
      recipe: opts.imageRecipe,
      logger: opts.logger,
      onUnreachable: (err) => this.engine.lost(err),
    })
    const { runtime, store, clock } = opts
    this.creation = {
      runtime,
      store,
      clock,
      pool: this.o,
      image: this.image,
      lost: (err) => this.engine.lost(err),
      closed: () => this.closed,
    }
  }

  /** The pool's name, its `berth.pool` label (the workspace volumes it mounts carry it too). */
  get name(): string {
    return this.o.name
  }

  private get idle(): PooledContainer[] {
    return [...this.containers.values()].filter((c) => c.state === 'idle')
  }

  /** 400 when a container with this memory cap (default: the pool's) could never fit the memory budget. */
  assertFits(memoryBytes?: number): void {
    const budget = this.memoryBudget
    budget?.assertFits(memoryBytes ?? budget.capOf(undefined))
  }

  /** `{ min, max, in_use, idle }`: containers being created count as neither. */
  stats(): PoolStats {
    let inUse = 0
    for (const c of this.containers.values()) if (c.state === 'in_use') inUse++
    return { min: this.o.min, max: this.o.max, in_use: inUse, idle: this.containers.size - inUse }
  }

  /** Claims without a spec the pool could serve now, none waiting: idle containers plus those `max` and the memory budget let it create. */
  room(): number {
    if (this.closed || this.engine.down || this.queue.length > 0) return 0
    const budget = this.memoryBudget
    const fit = budget ? budget.room(this.containers.values(), this.creatingBytes, budget.capOf(undefined)) : Infinity
    return this.idle.length + Math.max(0, Math.min(this.o.max - this.containers.size - this.creating, fit))
  }

  /** Tasks' claims waiting for a container: the pool is at `max`, or the memory budget is taken. */
  get waiting(): number {
    return this.queue.forWorkspaces
  }

  /** Every container the pool holds, oldest first. */
  list(): PooledContainer[] {
    return [...this.containers.values()].sort((a, b) =>
      a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0,
    )
  }

  /** The engine's state for `/health`: its name, whether it answers, the last error, the image's state. */
  engineStatus(): EngineHealth {
    const image = this.image.status()
    return { ...this.engine.status(), image }
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
      this.engine.lost(err)
      throw err
    }
    this.afterConnect()
    await this.warm.running
    return result
  }

  /** Ping (bounded), then recover once. */
  private async connect(): Promise<{ adopted: number; removed: number }> {
    await this.engine.ping()
    const result = this.recovered ? { adopted: 0, removed: 0 } : await this.recover()
    this.recovered = true
    this.engine.up()
    return result
  }

  /** The wait after a failed connect is over: try again; a failure waits longer. */
  private reconnect(): void {
    const attempt = this.connect().then(
      ({ adopted, removed }) => {
        if (this.closed) return
        this.o.logger.info('container engine answers', { runtime: this.o.runtime.name, adopted, removed })
        this.afterConnect()
      },
      (e) => this.engine.lost(e),
    )
    this.track(attempt)
  }

  /** The engine answers: provision the image in the background, warm up, serve waiting claims. */
  private afterConnect(): void {
    this.track(this.image.ready()) // failures are logged and shown in /health; creations try again
    this.warm.fill()
    this.serveWaiters()
  }

  /** Adopt what a previous run left that is still accounted for; remove the rest (see {@link recoverPool}). */
  recover(): Promise<{ adopted: number; removed: number }> {
    return recoverPool({ ...this.o, specHash: specHash(this.o), keep: (c) => this.containers.set(c.id, c) })
  }

  /**
   * A container for a task. Warm when one is idle and no dedicated spec is asked for;
   * otherwise created now; when the pool is full, the claim waits its turn (abortable).
   */
  claim(req: ClaimRequest): Promise<Lease> {
    const started = performance.now()
    const lease = this.claimTurn(req)
    lease.then(
      () => this.o.metrics?.containerClaimed(secondsFrom(started)),
      () => {},
    )
    return lease
  }

  /** A lease now, or a turn in the queue of waiting claims. */
  private claimTurn(req: ClaimRequest): Promise<Lease> {
    if (this.closed) return Promise.reject(new ApiError('CONTAINER_FAILED', 'The container pool is shut down'))
    if (req.signal?.aborted) return Promise.reject(req.signal.reason)
    if (this.engine.down) {
      const name = this.o.runtime.name
      return Promise.reject(
        new ContainerError(
          'unreachable',
          `The ${name} engine is not answering (${this.engine.error}); Berth keeps retrying in the background`,
          { runtime: name },
        ),
      )
    }
    if (this.queue.length === 0) {
      const lease = this.tryClaim(req)
      if (lease) return lease
    }
    const turn = this.queue.wait(req)
    this.tellWait(req)
    // Capacity may be free already (earlier waiters were waiting on a creation).
    queueMicrotask(() => this.serveWaiters())
    return turn
  }

  /** A lease now (warm, or a creation under way), or `null` when the pool is full. */
  private tryClaim(req: ClaimRequest): Promise<Lease> | null {
    if (!req.spec) {
      const warm = this.idle[0]
      if (warm) {
        const lease = this.lease(warm, req)
        this.warm.fill()
        return lease
      }
    }
    if (this.containers.size + this.creating < this.o.max) {
      if (!this.memoryFits(req.spec)) {
        // Idle warm containers hold memory no one uses: give one back to make room.
        const idle = this.idle[0]
        if (idle) this.track(this.reap(idle.id))
        return null
      }
      return this.create(req).then((c) => {
        // Creations for claims counted toward the warm-up meanwhile; warm up for real now.
        const lease = this.lease(c, req)
        this.warm.fill()
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
    await this.o.store.set(poolKey(this.o.name, c.id), c)
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
    const bytes = this.memoryBudget?.capOf(req?.spec) ?? 0
    this.creating++
    this.creatingBytes += bytes
    try {
      const record = await createContainer(this.creation, newId('container'), req)
      this.containers.set(record.id, record)
      return record
    } finally {
      this.creating--
      this.creatingBytes -= bytes
    }
  }

  /** Remove a container (released, or forced) and let the queue and the warm set move on. */
  private async reap(id: string): Promise<void> {
    const c = this.containers.get(id)
    if (!c) return
    this.containers.delete(id)
    const removal = this.o.runtime
      .remove(c.engine_id)
      .catch((err) => this.o.logger.warn('could not remove container', { id, error: String(err) }))
    this.track(removal)
    await removal
    await this.o.store.remove(poolKey(this.o.name, id))
    this.serveWaiters()
    this.warm.fill()
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

  /** Record the workspace an in-use container now serves and what for (a warm agent handed to a session's task), for previews and a restart. */
  async assign(id: string, workspaceId: string, purpose: ClaimRequest['purpose']): Promise<void> {
    const c = this.get(id)
    c.workspace_id = workspaceId
    c.purpose = purpose
    await this.o.store.set(poolKey(this.o.name, c.id), c)
  }

  /** Admin force-remove: 404 for an unknown id. A holder of the lease sees CONTAINER_FAILED. */
  async forceRemove(id: string): Promise<void> {
    this.get(id)
    await this.reap(id)
  }

  /** Hand capacity to waiting claims, best first. */
  private serveWaiters(): void {
    while (this.queue.length && !this.closed) {
      const next = this.queue.next(this.containers.values())
      const lease = this.tryClaim(next.req)
      if (!lease) {
        this.tellWait(next.req)
        return
      }
      this.queue.remove(next)
      lease.then(next.resolve, (err) => {
        next.reject(err)
        this.serveWaiters()
      })
    }
  }

  /** Whether warming should create another container now (claims waiting come first). */
  private wantsWarm(): boolean {
    return (
      !this.closed &&
      !this.engine.down &&
      this.queue.length === 0 &&
      this.idle.length + this.creating < this.o.min &&
      this.containers.size + this.creating < this.o.max &&
      this.memoryFits(undefined)
    )
  }

  /** Whether a container made from `spec` fits the memory budget beside the others. */
  private memoryFits(spec: ClaimRequest['spec']): boolean {
    const budget = this.memoryBudget
    return !budget || budget.fits(this.containers.values(), this.creatingBytes, budget.capOf(spec))
  }

  /** Tell a waiting claim why it waits: the pool is at `max`, or the memory budget is taken. */
  private tellWait(req: ClaimRequest): void {
    if (!req.onWait) return
    if (this.containers.size + this.creating >= this.o.max) {
      const message = `All ${this.o.max} containers of the pool are in use; the task starts when one is released`
      req.onWait({ reason: 'pool_full', message })
      return
    }
    const budget = this.memoryBudget
    if (!budget || this.memoryFits(req.spec)) return
    const message = budget.waitMessage(this.containers.values(), this.creatingBytes, budget.capOf(req.spec))
    req.onWait({ reason: 'memory', message })
  }

  /**
   * Stop: waiting claims fail with CONTAINER_FAILED. Containers stay on the engine (a
   * restart adopts them) unless `removeAll` is set.
   */
  async close(opts: { removeAll?: boolean } = {}): Promise<void> {
    this.closed = true
    this.warm.stop()
    this.engine.close()
    for (const w of this.queue.drain()) w.reject(new ApiError('CONTAINER_FAILED', 'The container pool is shut down'))
    await this.warm.running
    // Removals that began while waiting (a lease released meanwhile) are waited for as well.
    while (this.inflight.size > 0) await Promise.all([...this.inflight])
    if (opts.removeAll) for (const id of [...this.containers.keys()]) await this.reap(id)
  }
}
