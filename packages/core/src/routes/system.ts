import { readinessOf } from '../readiness.js'
import { defineHandlers } from '../route.js'

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
