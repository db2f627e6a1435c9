/**
 * Monthly spending limits: a caller's (set by the operator) and a profile's (its
 * `monthly_budget_usd`), checked against the ledger's spend of the calendar month (UTC),
 * which every instance reads from the store: a submit past a limit is refused, and the
 * model gateway holds running tasks' model calls to what is left of each.
 */
import { ApiError, type UserLimits } from '@berth/contract'
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { UsageLedger, type UsageLedgerOptions } from './ledger.js'

/** A monthly limit (the caller's or a profile's) and what was spent against it this month. */
export interface MonthlyLimit {
  scope: 'user' | 'profile'
  limit: number
  spent: number
  /** The start of next month (UTC), ISO-8601. */
  resets_at: string
}

/** Which limit is spent, what it is and what was spent against it. */
export type BudgetExceeded = MonthlyLimit

/** The start of the calendar month (UTC) after `ms`, ISO-8601. */
export function nextMonthStart(ms: number): string {
  const d = new Date(ms)
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)).toISOString()
}

const limitsKey = (userId: string) => `usage-limits:${userId}`

/** A caller's spending limit and this month's spend (the caps beside it are `CallerCaps`'). */
export type BudgetLimits = Pick<UserLimits, 'user_id' | 'monthly_budget_usd' | 'spent_usd' | 'resets_at'>

/**
 * Limits per caller and the check against them.
 *
 * @example
 * ```ts
 * await budgets.set('usr_1', 200)
 * await budgets.assertWithin('usr_1', profile) // throws 402 BUDGET_EXCEEDED once $200 is spent this month
 * ```
 */
export class Budgets {
  constructor(private readonly o: { store: Store; clock: Clock; ledger: UsageLedger }) {}

  /** A caller's limit and this month's spend. */
  async get(userId: string): Promise<BudgetLimits> {
    const now = this.o.clock.now()
    const [stored, spend] = await Promise.all([
      this.o.store.get<{ monthly_budget_usd: number | null }>(limitsKey(userId)),
      this.o.ledger.monthSpend(userId, now),
    ])
    return {
      user_id: userId,
      monthly_budget_usd: stored?.monthly_budget_usd ?? null,
      spent_usd: spend.cost_usd,
      resets_at: nextMonthStart(now),
    }
  }

  /** Set (or clear with null) a caller's monthly limit. */
  async set(userId: string, monthlyBudgetUsd: number | null): Promise<BudgetLimits> {
    if (monthlyBudgetUsd === null) await this.o.store.remove(limitsKey(userId))
    else await this.o.store.set(limitsKey(userId), { monthly_budget_usd: monthlyBudgetUsd })
    return this.get(userId)
  }

  /**
   * The monthly limits a caller's task on `profile` runs under (the caller's, then the
   * profile's, those that are set), each with this month's spend against it.
   */
  async limits(
    owner: string,
    profile: { id: string; monthly_budget_usd?: number | null | undefined },
  ): Promise<MonthlyLimit[]> {
    const stored = await this.o.store.get<{ monthly_budget_usd: number | null }>(limitsKey(owner))
    const userLimit = stored?.monthly_budget_usd ?? null
    const profileLimit = profile.monthly_budget_usd ?? null
    if (userLimit === null && profileLimit === null) return []
    const now = this.o.clock.now()
    const spend = await this.o.ledger.monthSpend(owner, now)
    const resets_at = nextMonthStart(now)
    const limits: MonthlyLimit[] = []
    if (userLimit !== null) limits.push({ scope: 'user', limit: userLimit, spent: spend.cost_usd, resets_at })
    if (profileLimit !== null)
      limits.push({ scope: 'profile', limit: profileLimit, spent: spend.profiles[profile.id] ?? 0, resets_at })
    return limits
  }

  /** The first spent limit of a caller's task on `profile`, or null while both have room. */
  async exceeded(
    owner: string,
    profile: { id: string; monthly_budget_usd?: number | null | undefined },
  ): Promise<BudgetExceeded | null> {
    return (await this.limits(owner, profile)).find((l) => l.spent >= l.limit) ?? null
  }

  /** 402 BUDGET_EXCEEDED with the figures when a limit of the caller or the profile is spent. */
  async assertWithin(owner: string, profile: { id: string; monthly_budget_usd?: number | null }): Promise<void> {
    const over = await this.exceeded(owner, profile)
    if (over) throw budgetError(over)
  }
}

/**
 * The error of a spent monthly limit.
 *
 * @example
 * ```ts
 * throw budgetError({ scope: 'user', limit: 0.05, spent: 0.06, resets_at: '2026-12-01T00:00:00.000Z' })
 * ```
 */
export function budgetError(over: BudgetExceeded): ApiError {
  const whose = over.scope === 'user' ? "The caller's" : "The profile's"
  return new ApiError(
    'BUDGET_EXCEEDED',
    `${whose} monthly spending limit of $${over.limit} is spent ($${over.spent.toFixed(4)} this month); it resets at ${over.resets_at}`,
    { ...over },
  )
}

/** The ledger and the limits checked against it, as the services hold them. */
export interface Usage {
  ledger: UsageLedger
  budgets: Budgets
}

/**
 * Build the usage ledger of this instance and the limits read from it.
 *
 * @example
 * ```ts
 * const usage = createUsage({ store, clock, logger, instanceId: coordination.instanceId })
 * await usage.budgets.set('usr_1', 200)
 * ```
 */
export function createUsage(o: UsageLedgerOptions): Usage {
  const ledger = new UsageLedger(o)
  return { ledger, budgets: new Budgets({ store: o.store, clock: o.clock, ledger }) }
}
