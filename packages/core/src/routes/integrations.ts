import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'
import { crudHandlers } from './crud.js'

export const integrationHandlers = defineHandlers({
  ...crudHandlers('integrations', (s) => s.integrations),
  'integrations.test': ({ caller, params, services }) => services.notifications.test(caller.id, params.id),
  'integrations.deliveries': async (ctx) => {
    const { caller, params, services } = ctx
    await services.integrations.records.get(caller.id, params.id)
    return listPage('integrations.deliveries', 'deliveries', ctx, (page) =>
      services.deliveries.list(caller.id, params.id, page),
    )
  },
})
