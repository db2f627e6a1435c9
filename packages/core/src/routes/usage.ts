import { defineHandlers } from '../route.js'
import { usageReport } from '../usage/report.js'

export const usageHandlers = defineHandlers({
  'usage.get': ({ caller, query, services }) =>
    usageReport(services.usage, services.clock.now(), { ...query, owner: caller.id }),
  'admin.usage': ({ query, services }) =>
    usageReport(services.usage, services.clock.now(), { ...query, owner: query.user_id }),
  'admin.limits.get': ({ params, services }) => services.budgets.get(params.id),
  'admin.limits.set': ({ params, body, services }) => services.budgets.set(params.id, body.monthly_budget_usd),
})
