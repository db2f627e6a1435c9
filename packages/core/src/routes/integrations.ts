import { defineHandlers } from '../route.js'
import { crudHandlers } from './crud.js'

export const integrationHandlers = defineHandlers({
  ...crudHandlers('integrations', (s) => s.integrations),
  'integrations.test': ({ caller, params, services }) => services.notifications.test(caller.id, params.id),
  'integrations.deliveries': async ({ caller, params, query, services }) => {
    await services.integrations.records.get(caller.id, params.id)
    const { items, total } = await services.deliveries.list(caller.id, params.id, query)
    return { deliveries: items, total }
  },
})
