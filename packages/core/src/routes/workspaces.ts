import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const workspaceHandlers = defineHandlers({
  'workspaces.list': (ctx) =>
    listPage('workspaces.list', 'workspaces', ctx, (page, filter) =>
      ctx.services.workspaces.list(ctx.caller.id, page, filter),
    ),
  'workspaces.get': ({ caller, params, services }) => services.workspaces.get(caller.id, params.id),
  'workspaces.update': async ({ caller, params, body, services }) => {
    if (body.model_override) {
      const ws = await services.workspaces.records.get(caller.id, params.id)
      await services.profiles.assertModel(caller.id, ws.profile_id, body.model_override, 'model_override')
    }
    return services.workspaces.update(caller.id, params.id, body)
  },
  'workspaces.delete': async ({ caller, params, services }) => {
    await services.deleteWorkspace(caller.id, params.id)
  },
  'workspaces.stop': ({ caller, params, services }) => services.stopSession(caller.id, params.id),
  'workspaces.transcript': async ({ caller, params, query, services }) => {
    await services.workspaces.assert(caller.id, params.id)
    const events = await services.eventLog.read(caller.id, params.id, { after: query.after, limit: query.limit })
    // Paged forward by `seq` (`after`), already a keyset: no cursor of its own.
    return { events, total: await services.eventLog.count(caller.id, params.id), next_cursor: null }
  },
})
