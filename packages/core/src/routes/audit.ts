import { defineHandlers } from '../route.js'

export const auditHandlers = defineHandlers({
  'admin.audit.list': async ({ query, services }) => {
    const { items, total } = await services.audit.list(null, query)
    return { entries: items, total }
  },
  'audit.list': async ({ caller, query, services }) => {
    const { items, total } = await services.audit.list(caller.id, query)
    return { entries: items, total }
  },
})
