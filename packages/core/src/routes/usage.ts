import { defineHandlers } from '../route.js'
import { usageReport } from '../usage/report.js'

export const usageHandlers = defineHandlers({
  'usage.get': ({ caller, query, services }) =>
    usageReport(services.usage.ledger, services.clock.now(), { ...query, owner: caller.id }),
  'admin.usage': ({ query, services }) =>
    usageReport(services.usage.ledger, services.clock.now(), { ...query, owner: query.user_id }),
  // An unknown user is 404 (limits are kept apart from the user record).
  'admin.limits.get': async ({ params, services }) => {
    await services.users.get(params.id)
    return services.usage.budgets.get(params.id)
  },
  'admin.limits.set': async ({ params, body, services }) => {
    await services.users.get(params.id)
    return services.usage.budgets.set(params.id, body.monthly_budget_usd ?? null)
  },
})
