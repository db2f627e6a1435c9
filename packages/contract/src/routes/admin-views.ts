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
  }),
] as const
