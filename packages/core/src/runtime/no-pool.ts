import { notFound, type EngineHealth, type PoolStats } from '@berth/contract'
import type { ContainerPool } from './pool.js'
import type { PooledContainer } from './pool-options.js'

/** What services reach of the warm pool: statistics, the containers, force-remove and the engine's state. */
export type PoolSurface = Pick<ContainerPool, 'stats' | 'list' | 'forceRemove'> & {
  engineStatus(): EngineHealth | null
}

/** The pool surface when no container runtime is configured. */
export const noPool: PoolSurface = {
  stats: (): PoolStats => ({ min: 0, max: 0, in_use: 0, idle: 0 }),
  list: (): PooledContainer[] => [],
  engineStatus: () => null,
  forceRemove: async (id: string) => {
    throw notFound('container', id)
  },
}
