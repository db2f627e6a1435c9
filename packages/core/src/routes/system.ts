import { ApiError } from '@berth/contract'
import { defineHandlers } from '../route.js'

export const systemHandlers = defineHandlers({
  health: ({ services }) => {
    // No engine status at all (null) is left out of the answer rather than sent as null.
    const engine = services.pool.engineStatus() ?? undefined
    return { ok: true as const, version: services.version, pool: services.pool.stats(), engine }
  },
  metrics: async ({ services }) => {
    const scrape = await services.metrics.exposition?.()
    if (!scrape) throw new ApiError('NOT_FOUND', 'Metrics are off on this server')
    return new Response(scrape.body, { headers: { 'content-type': scrape.contentType } })
  },
  'admin.users.create': ({ body, services }) => services.users.create(body),
  'admin.users.list': async ({ query, services }) => {
    const { items, total } = await services.users.list(query)
    return { users: items, total }
  },
  'admin.users.delete': async ({ params, services }) => {
    await services.users.remove(params.id)
  },
  'admin.keys.create': ({ params, body, services }) => services.users.issueKey(params.id, body),
  'admin.keys.delete': async ({ params, services }) => {
    await services.users.revokeKey(params.id)
  },
})
