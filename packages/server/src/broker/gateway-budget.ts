/**
 * Budgets held while model calls run. Every limit a call runs under (its task's
 * `max_budget_usd`, its caller's and its profile's monthly limits) is a pool: what is left of
 * it is the limit minus what settled calls spent, and every call under way holds a part of
 * that remainder. A call is admitted when its worst case fits in what no other call holds; a
 * call whose worst case does not fit waits for the calls under way to settle, unless none
 * is under way, in which case it holds all that is left. While it streams, a call may take
 * more from what nobody holds; once its running cost would pass that, it is cut. So calls
 * under way never share one remainder twice, and a limit is passed by at most what one
 * call's last event cost.
 *
 * A settled call's cost counts in its pool until the figure the pool reads again includes
 * it: at once for a task (the gateway's own totals), once the usage ledger wrote it for a
 * month (`written`), so a call admitted while the write is under way cannot spend it twice.
 */
import type { GatewayGrant } from '@berth/core'

/** One limit a model call runs under. */
export interface BudgetLimit {
  /** `task:<id>`, `user:<id>` or `profile:<id>`: calls with the same key share one remainder. */
  key: string
  scope: 'task' | 'user' | 'profile'
  limit: number
  /** Spent against it as its source read it (the gateway's totals for a task, the shared ledger for a month). */
  spent: number
  /** {@link Reservations.epoch} when that reading began. */
  readAt: number
}

/** A call's share of its pools while it runs. */
export interface Hold {
  /**
   * The call's running cost so far. Null while it is covered (taking more from what nobody
   * holds as it grows); else the limit it would pass, with the spend it would reach.
   */
  charge(cost: number): BudgetLimit | null
  /** Hold no more than `worst` (not below the cost charged so far): the call's worst case, once its input is known. */
  shrink(worst: number): void
  /** The call ended at `cost`. `written` resolves once the usage ledger has it (monthly pools count it until then). */
  settle(cost: number, written?: Promise<unknown>): void
}

/** How an admission ended: a hold, a limit already spent, or the call's end (client gone, task ended). */
export type Admission = { hold: Hold } | { spent: BudgetLimit } | { gone: 'aborted' | 'ended' }

interface Pool {
  limit: number
  /** The last reading of the spend, and the epoch it began at. */
  base: number
  baseReadAt: number
  /** Calls under way and what each holds. */
  holds: Map<symbol, number>
  /** Settled calls the source may not have counted yet; `at`: when it did (undefined: not yet). */
  settled: { cost: number; at: number | undefined }[]
}

interface Waiter {
  taskId: string
  limits: BudgetLimit[]
  worst: number
  done(admission: Admission): void
}

const spentOf = (p: Pool) =>
  p.settled.reduce((sum, s) => (s.at === undefined || s.at > p.baseReadAt ? sum + s.cost : sum), p.base)
const heldOf = (p: Pool) => {
  let sum = 0
  for (const v of p.holds.values()) sum += v
  return sum
}

/**
 * The gateway's pools and the calls waiting for room in them. One per gateway: its pools
 * are the calls that this instance runs (see docs/CREDENTIALS.md for what holds across instances).
 *
 * @example
 * ```ts
 * const book = new Reservations()
 * const readAt = book.epoch()
 * const limits = [{ key: 'task:t1', scope: 'task', limit: 0.5, spent: 0, readAt }]
 * const a = await book.admit('t1', limits, 0.2, signal)
 * if ('hold' in a) { a.hold.charge(0.05); a.hold.settle(0.08) }
 * ```
 */
export class Reservations {
  private readonly pools = new Map<string, Pool>()
  private waiters: Waiter[] = []
  private clock = 0

  /** The current epoch: take it before reading a spend, and pass it as that reading's `readAt`. */
  epoch(): number {
    return this.clock
  }

  /**
   * Hold room for a call of `taskId` whose worst case is `worst` USD in every pool of
   * `limits`: at once when it fits, after the calls under way settled when it does not,
   * `spent` when a limit has nothing left.
   */
  admit(taskId: string, limits: BudgetLimit[], worst: number, signal: AbortSignal): Promise<Admission> {
    const now = this.tryAdmit(limits, worst)
    if (now) return Promise.resolve(now)
    return new Promise<Admission>((resolve) => {
      const waiter: Waiter = {
        taskId,
        limits,
        worst,
        done: (a) => {
          signal.removeEventListener('abort', onAbort)
          resolve(a)
        },
      }
      const onAbort = () => {
        this.waiters = this.waiters.filter((w) => w !== waiter)
        waiter.done({ gone: 'aborted' })
      }
      signal.addEventListener('abort', onAbort)
      this.waiters.push(waiter)
    })
  }

  /** The first of `limits` with nothing left (with what was spent against it), or null. */
  spent(limits: BudgetLimit[]): BudgetLimit | null {
    for (const l of limits) {
      const p = this.pool(l)
      const spent = spentOf(p)
      if (spent >= p.limit) return { ...l, limit: p.limit, spent }
    }
    return null
  }

  /** A task ended: its pool goes, and its calls still waiting are answered. */
  forget(taskId: string): void {
    this.pools.delete(`task:${taskId}`)
    const ended = this.waiters.filter((w) => w.taskId === taskId)
    this.waiters = this.waiters.filter((w) => w.taskId !== taskId)
    for (const w of ended) w.done({ gone: 'ended' })
  }

  private pool(l: BudgetLimit): Pool {
    let p = this.pools.get(l.key)
    if (!p) {
      p = { limit: l.limit, base: l.spent, baseReadAt: l.readAt, holds: new Map(), settled: [] }
      this.pools.set(l.key, p)
    } else if (l.readAt >= p.baseReadAt) {
      p.limit = l.limit
      p.base = l.spent
      p.baseReadAt = l.readAt
      // What this reading includes no longer needs counting apart.
      p.settled = p.settled.filter((s) => s.at === undefined || s.at > l.readAt)
    }
    return p
  }

  private tryAdmit(limits: BudgetLimit[], worst: number): Admission | null {
    const spent = this.spent(limits)
    if (spent) return { spent }
    const pools = limits.map((l) => this.pool(l))
    const rooms = pools.map((p) => p.limit - spentOf(p) - heldOf(p))
    // A call that does not fit waits for the others, unless none is under way: then it holds what is left.
    if (pools.some((p, i) => worst > rooms[i]! && p.holds.size > 0)) return null
    return {
      hold: this.hold(
        limits,
        pools,
        rooms.map((room) => Math.min(worst, room)),
      ),
    }
  }

  private hold(limits: BudgetLimit[], pools: Pool[], amounts: number[]): Hold {
    const id = Symbol('call')
    for (const [i, p] of pools.entries()) p.holds.set(id, amounts[i]!)
    let charged = 0
    let settled = false
    return {
      charge: (cost) => {
        charged = Math.max(charged, cost)
        let crossed: BudgetLimit | null = null
        for (const [i, p] of pools.entries()) {
          const held = p.holds.get(id) ?? 0
          if (cost <= held) continue
          const free = Math.max(0, p.limit - spentOf(p) - heldOf(p))
          p.holds.set(id, held + Math.min(free, cost - held))
          if (free < cost - held) crossed ??= { ...limits[i]!, limit: p.limit, spent: spentOf(p) + cost }
        }
        return crossed
      },
      shrink: (worst) => {
        const target = Math.max(worst, charged)
        let freed = false
        for (const p of pools) {
          const held = p.holds.get(id)
          if (held !== undefined && held > target) {
            p.holds.set(id, target)
            freed = true
          }
        }
        if (freed) this.wake()
      },
      settle: (cost, written) => {
        if (settled) return
        settled = true
        for (const [i, p] of pools.entries()) {
          p.holds.delete(id)
          if (cost <= 0) continue
          const entry: { cost: number; at: number | undefined } = { cost, at: undefined }
          p.settled.push(entry)
          // A task's spend is read from the gateway's totals, which have it already.
          if (limits[i]!.scope === 'task' || !written) entry.at = ++this.clock
          else
            written.then(
              () => {
                entry.at = ++this.clock
              },
              () => {
                // Never written: it stays counted here, as it was spent.
              },
            )
        }
        this.wake()
      },
    }
  }

  /** Admit the waiting calls that now fit, in the order they came; a pool one of them waits on stays its. */
  private wake(): void {
    const blocked = new Set<string>()
    const still: Waiter[] = []
    for (const w of this.waiters) {
      const answer = w.limits.some((l) => blocked.has(l.key)) ? null : this.tryAdmit(w.limits, w.worst)
      if (answer) w.done(answer)
      else {
        still.push(w)
        for (const l of w.limits) blocked.add(l.key)
      }
    }
    this.waiters = still
  }
}

/**
 * The limits a grant's model calls run under: the task's `max_budget_usd` against
 * `taskSpent` (read at `taskReadAt`) and the monthly limits the grant carries (read from the
 * ledger from `monthReadAt` on).
 *
 * @example
 * ```ts
 * const readAt = book.epoch()
 * const grant = await authorize(token)
 * const limits = limitsOf(grant, totals.get(grant.task_id)?.cost_usd ?? 0, book.epoch(), readAt)
 * ```
 */
export function limitsOf(grant: GatewayGrant, taskSpent: number, taskReadAt: number, monthReadAt: number) {
  const limits: BudgetLimit[] = grant.monthly_limits.map((m) => ({
    key: m.scope === 'user' ? `user:${grant.owner_id}` : `profile:${grant.profile_id}`,
    scope: m.scope,
    limit: m.limit,
    spent: m.spent,
    readAt: monthReadAt,
  }))
  if (grant.max_budget_usd !== null)
    limits.unshift({
      key: `task:${grant.task_id}`,
      scope: 'task',
      limit: grant.max_budget_usd,
      spent: taskSpent,
      readAt: taskReadAt,
    })
  return limits
}

/**
 * What the agent reads when a limit is spent (`l.spent` is what was spent against it).
 *
 * @example
 * ```ts
 * spentMessage({ key: 'task:t1', scope: 'task', limit: 0.5, spent: 0.52, readAt: 0 })
 * // "this task's budget of $0.5 is spent ($0.5200 used)"
 * ```
 */
export function spentMessage(l: BudgetLimit): string {
  if (l.scope === 'task') return `this task's budget of $${l.limit} is spent ($${l.spent.toFixed(4)} used)`
  const whose = l.scope === 'user' ? "the caller's" : "the profile's"
  return `${whose} monthly spending limit of $${l.limit} is spent ($${l.spent.toFixed(4)} this month)`
}
