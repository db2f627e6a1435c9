import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'
import { Health, Readiness } from '../schemas/health.js'
import { CreateCallerKey, CreateUser, IssuedCallerKey, User } from '../schemas/user.js'

export const health = defineRoute({
  name: 'health',
  method: 'GET',
  path: '/health',
  auth: 'public',
  tag: 'system',
  summary: "Liveness check with version, pool statistics and the container engine's state",
  response: Health,
  unlimited: true,
})

export const healthReady = defineRoute({
  name: 'health.ready',
  method: 'GET',
  path: '/health/ready',
  auth: 'public',
  tag: 'system',
  summary: 'Readiness: 200 while this instance can take tasks, 503 SERVICE_UNAVAILABLE while not',
  description:
    'Not ready while the store or the coordination backend is unreachable, the coordination lease is not held, the instance is draining after SIGTERM, or the container engine does not answer. The 503 carries `details.checks`.',
  response: Readiness,
  unlimited: true,
})

export const adminRoutes = [
  defineRoute({
    name: 'admin.users.create',
    method: 'POST',
    path: '/admin/users',
    auth: 'admin',
    tag: 'admin',
    summary: 'Create a user and its first caller key',
    description: 'The key token is in this response only; Berth stores its SHA-256 hash.',
    body: CreateUser,
    response: v.object({ user: User, key: IssuedCallerKey }),
    status: 201,
  }),
  defineRoute({
    name: 'admin.users.list',
    method: 'GET',
    path: '/admin/users',
    auth: 'admin',
    tag: 'admin',
    summary: 'List users',
    query: v.object(PageQuery),
    response: ListOf('users', User),
  }),
  defineRoute({
    name: 'admin.users.delete',
    method: 'DELETE',
    path: '/admin/users/:id',
    auth: 'admin',
    tag: 'admin',
    summary: 'Delete a user and revoke its keys',
    params: IdParams('user'),
    status: 204,
  }),
  defineRoute({
    name: 'admin.keys.create',
    method: 'POST',
    path: '/admin/users/:id/keys',
    auth: 'admin',
    tag: 'admin',
    summary: 'Issue another caller key for a user',
    params: IdParams('user'),
    body: CreateCallerKey,
    response: IssuedCallerKey,
    status: 201,
  }),
  defineRoute({
    name: 'admin.keys.delete',
    method: 'DELETE',
    path: '/admin/keys/:id',
    auth: 'admin',
    tag: 'admin',
    summary: 'Revoke a caller key (takes effect at once)',
    params: IdParams('callerKey'),
    status: 204,
  }),
] as const
