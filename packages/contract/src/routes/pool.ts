import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'
import { PoolStats } from '../schemas/health.js'
import { PoolContainer } from '../schemas/pool.js'

export const poolRoutes = [
  defineRoute({
    name: 'pool.stats',
    method: 'GET',
    path: '/v1/pool',
    auth: 'caller',
    tag: 'pool',
    summary: 'Warm pool statistics: min, max, in use, idle',
    response: PoolStats,
  }),
  defineRoute({
    name: 'pool.containers.list',
    method: 'GET',
    path: '/v1/pool/containers',
    auth: 'caller',
    tag: 'pool',
    summary: 'List managed containers',
    description: 'An admin sees every container; other callers see the containers working for them.',
    query: v.object(PageQuery),
    response: ListOf('containers', PoolContainer),
  }),
  defineRoute({
    name: 'pool.containers.delete',
    method: 'DELETE',
    path: '/v1/pool/containers/:id',
    auth: 'admin',
    tag: 'pool',
    summary: 'Force-remove a container (admin)',
    description: 'Removes the container from the engine at once; a task using it fails with CONTAINER_FAILED.',
    params: IdParams('container'),
    status: 204,
  }),
] as const
