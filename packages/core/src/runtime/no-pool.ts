/** The pool as the services show it, and its stand-in when no container runtime is configured. */
import { notFound, type EngineHealth, type PoolStats } from '@berth/contract'
import type { ContainerPool } from './pool.js'
import type { PooledContainer } from './pool-options.js'

/** What the services show of the pool: statistics, containers, force-removal and the engine's state. */
export type PoolView = Pick<ContainerPool, 'stats' | 'list' | 'forceRemove'> & { engineStatus(): EngineHealth | null }

/** The pool surface when no container runtime is configured. */
export const noPool: PoolView = {
  stats: (): PoolStats => ({ min: 0, max: 0, in_use: 0, idle: 0 }),
  list: (): PooledContainer[] => [],
  engineStatus: () => null,
  forceRemove: async (id: string) => {
    throw notFound('container', id)
  },
}
