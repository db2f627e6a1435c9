import { defineHandlers } from '../route.js'
import type { Services } from '../services.js'
import type { UserLimits } from '@berth/contract'
import type { BudgetLimits } from '../usage/budgets.js'
import { usageReport } from '../usage/report.js'

/** A caller's spending limit and spend, with its caps. */
async function userLimits(services: Services, id: string, budget: BudgetLimits): Promise<UserLimits> {
  const own = await services.callers.get(id)
  const limit = services.callers.limitOf(id)
  return { ...budget, ...own, effective_max_running: limit === Number.MAX_SAFE_INTEGER ? null : limit }
}

export const usageHandlers = defineHandlers({
  'usage.get': ({ caller, query, services }) =>
    usageReport(services.usage.ledger, services.clock.now(), { ...query, owner: caller.id }),
  'admin.usage': ({ query, services }) =>
    usageReport(services.usage.ledger, services.clock.now(), { ...query, owner: query.user_id }),
  // An unknown user is 404 (limits are kept apart from the user record).
  'admin.limits.get': async ({ params, services }) => {
    await services.users.get(params.id)
    return userLimits(services, params.id, await services.usage.budgets.get(params.id))
  },
  'admin.limits.set': async ({ params, body, services }) => {
    await services.users.get(params.id)
    const budget = await services.usage.budgets.set(params.id, body.monthly_budget_usd ?? null)
    await services.callers.set(params.id, {
      max_running: body.max_running ?? null,
      pool_share: body.pool_share ?? null,
    })
    return userLimits(services, params.id, budget)
  },
})
