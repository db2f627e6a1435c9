import { paginate } from '../records/collection.js'
import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const poolHandlers = defineHandlers({
  'pool.stats': ({ services }) => services.pool.stats(),
  // The pool's containers are in memory (no stored index): listed by id, highest first, so
  // a cursor can remember the last id.
  'pool.containers.list': (ctx) =>
    listPage('pool.containers.list', 'containers', ctx, async (page) => {
      const { caller, services } = ctx
      const all = services.pool
        .list()
        .filter((c) => caller.role === 'admin' || c.owner_id === caller.id)
        .sort((x, y) => (x.id < y.id ? 1 : x.id > y.id ? -1 : 0))
      return paginate(all, page, (c) => c.id)
    }),
  'pool.containers.delete': async ({ params, services }) => {
    const owner = services.pool.list().find((c) => c.id === params.id)?.owner_id ?? undefined
    await services.pool.forceRemove(params.id)
    await services.audit.record({
      action: 'container.force_removed',
      target: { type: 'container', id: params.id },
      owner,
    })
  },
})
