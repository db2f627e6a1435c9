import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const adminViewHandlers = defineHandlers({
  'admin.keys.list': (ctx) =>
    listPage('admin.keys.list', 'keys', ctx, (page) => ctx.services.users.listKeys(ctx.params.id, page)),
  'admin.limits': async ({ services }) => {
    const rate = (await services.rateLimiter?.state?.()) ?? null
    const owners = new Map(
      services.pool
        .list()
        .flatMap((c) => (c.workspace_id && c.owner_id ? [[c.workspace_id, c.owner_id] as const] : [])),
    )
    return {
      rate: rate && {
        rpm: rate.rpm,
        burst: rate.burst,
        callers: rate.keys.map((k) => ({ caller_id: k.key, remaining: k.remaining, reset_seconds: k.reset_seconds })),
      },
      concurrency: {
        limit: services.slots.limit,
        profiles: (await services.slots.sharedSnapshot()).map((p) => ({
          profile_id: p.profile_id,
          owner_id: p.holders.map((w) => owners.get(w)).find((o) => o !== undefined) ?? null,
          running: p.holders.length,
          workspace_ids: p.holders,
        })),
      },
    }
  },
})
