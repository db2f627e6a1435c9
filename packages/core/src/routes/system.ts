import { ApiError } from '@berth/contract'
import { readinessOf } from '../readiness.js'
import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const systemHandlers = defineHandlers({
  health: async ({ services }) => {
    // No engine status at all (null) is left out of the answer rather than sent as null.
    const engine = services.pool.engineStatus() ?? undefined
    const readiness = readinessOf(services)
    return {
      ok: true as const,
      version: services.version,
      pool: services.pool.stats(),
      engine,
      store: await readiness.store(),
      coordination: readiness.coordination(),
    }
  },
  'health.ready': ({ services }) => readinessOf(services).answer(),
  metrics: async ({ services }) => {
    const scrape = await services.metrics.exposition?.()
    if (!scrape) throw new ApiError('NOT_FOUND', 'Metrics are off on this server')
    return new Response(scrape.body, { headers: { 'content-type': scrape.contentType } })
  },
  'admin.users.create': async ({ body, services }) => {
    const created = await services.users.create(body)
    const { user, key } = created
    await services.audit.record({ action: 'user.created', target: { type: 'user', id: user.id }, owner: user.id })
    await services.audit.record({ action: 'key.issued', target: { type: 'caller_key', id: key.id }, owner: user.id })
    return created
  },
  'admin.users.list': (ctx) => listPage('admin.users.list', 'users', ctx, (page) => ctx.services.users.list(page)),
  'admin.users.delete': async ({ params, services }) => {
    await services.users.remove(params.id)
    await services.audit.record({ action: 'user.deleted', target: { type: 'user', id: params.id }, owner: params.id })
  },
  'admin.keys.create': async ({ params, body, services }) => {
    const key = await services.users.issueKey(params.id, body)
    await services.audit.record({ action: 'key.issued', target: { type: 'caller_key', id: key.id }, owner: params.id })
    return key
  },
  'admin.keys.delete': async ({ params, services }) => {
    const { user_id } = await services.users.revokeKey(params.id)
    await services.audit.record({
      action: 'key.revoked',
      target: { type: 'caller_key', id: params.id },
      owner: user_id,
    })
  },
})
