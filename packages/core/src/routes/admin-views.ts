import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'
import { LimitsState } from '../schemas/limits.js'
import { CallerKey } from '../schemas/user.js'

/** What the operator's console reads beside the admin actions: keys per user, limits in use. */
export const adminViewRoutes = [
  defineRoute({
    name: 'admin.keys.list',
    method: 'GET',
    path: '/admin/users/:id/keys',
    auth: 'admin',
    tag: 'admin',
    summary: "List a user's caller keys (metadata only: never the token)",
    params: IdParams('user'),
    query: v.object(PageQuery),
    response: ListOf('keys', CallerKey),
    handle: async ({ params, query, services }) => {
      const { items, total } = await services.users.listKeys(params.id, query)
      return { keys: items, total }
    },
  }),
  defineRoute({
    name: 'admin.limits',
    method: 'GET',
    path: '/admin/limits',
    auth: 'admin',
    tag: 'admin',
    summary: 'Rate limit and concurrency state per caller, right now',
    description:
      "Each caller whose token bucket is not full (requests left, seconds until full) and each profile with running workspaces, with its owner (from the pool's claimed containers). In-process state: with several instances, each answers for itself.",
    response: LimitsState,
    unlimited: true,
    handle: async ({ services }) => {
      const rate = (await services.rateLimiter?.state?.()) ?? null
      const owners = new Map(services.pool.list().flatMap((c) => (c.workspace_id && c.owner_id ? [[c.workspace_id, c.owner_id] as const] : [])))
      return {
        rate: rate && { rpm: rate.rpm, burst: rate.burst, callers: rate.keys.map((k) => ({ caller_id: k.key, remaining: k.remaining, reset_seconds: k.reset_seconds })) },
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
  }),
] as const
