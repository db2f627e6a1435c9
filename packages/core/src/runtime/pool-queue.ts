/** Claims waiting for a full pool, served fairly: priority first, then the owner holding the fewest containers, then arrival. */
import type { ClaimRequest, Lease, PooledContainer, Priority } from './pool-options.js'

const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 }

/** A claim waiting its turn. */
export interface Waiter {
  req: ClaimRequest
  seq: number
  resolve: (lease: Lease) => void
  reject: (err: unknown) => void
}

/**
 * The fair queue of waiting claims. The pool settles a waiter when it serves it; an
 * aborted claim leaves the queue and rejects with its signal's reason.
 *
 * @example
 * ```ts
 * const queue = new ClaimQueue()
 * const turn = queue.wait({ owner_id: 'usr_1', purpose: 'batch' })
 * const next = queue.next(containers.values()) // then queue.remove(next) and next.resolve(lease)
 * ```
 */
export class ClaimQueue {
  private readonly waiters: Waiter[] = []
  private seq = 0

  get length(): number {
    return this.waiters.length
  }

  /** Waiting claims made for a workspace (a task's), not ahead of one (a warm agent's). */
  get forWorkspaces(): number {
    let n = 0
    for (const w of this.waiters) if (w.req.workspace_id) n++
    return n
  }

  /** Join the queue; the promise settles when the pool serves this claim or its signal aborts. */
  wait(req: ClaimRequest): Promise<Lease> {
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = { req, seq: this.seq++, resolve, reject }
      this.waiters.push(waiter)
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

  /** The waiter to serve next, given the containers the pool holds (the queue must not be empty). */
  next(containers: Iterable<PooledContainer>): Waiter {
    const held = new Map<string, number>()
    for (const c of containers) if (c.owner_id) held.set(c.owner_id, (held.get(c.owner_id) ?? 0) + 1)
    return this.waiters.reduce((best, w) => {
      const a = [RANK[w.req.priority ?? 'normal'], held.get(w.req.owner_id) ?? 0, w.seq]
      const b = [RANK[best.req.priority ?? 'normal'], held.get(best.req.owner_id) ?? 0, best.seq]
      for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? w : best
      return best
    })
  }

  /** Take a served waiter out of the queue. */
  remove(waiter: Waiter): void {
    this.waiters.splice(this.waiters.indexOf(waiter), 1)
  }

  /** Empty the queue, returning who waited (to reject them at shutdown). */
  drain(): Waiter[] {
    return this.waiters.splice(0)
  }
}
