import { paginate } from '../records/collection.js'
import { defineHandlers } from '../route.js'

export const poolHandlers = defineHandlers({
  'pool.stats': ({ services }) => services.pool.stats(),
  'pool.containers.list': ({ caller, query, services }) => {
    const all = services.pool.list().filter((c) => caller.role === 'admin' || c.owner_id === caller.id)
    const { items, total } = paginate(all, query)
    return { containers: items, total }
  },
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
