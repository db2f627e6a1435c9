import { notFound } from '../errors.js'
import { DEFAULT_MODELS, staticCatalog, type ModelCatalog } from '../models.js'
import { systemClock, type Clock } from '../ports/clock.js'
import type { Cipher } from '../ports/cipher.js'
import { silentLogger, type Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { PoolStats } from '../schemas/health.js'
import { ApiKeysService } from './api-keys.js'
import {
  createAgentsService,
  createSecretsService,
  createSkillsService,
  createToolsService,
  type AgentsService,
  type SecretsService,
  type SkillsService,
  type ToolsService,
} from './catalog.js'
import { MemoryService } from './memory.js'
import type { ContainerPool, PooledContainer } from './pool.js'
import { ProfilesService } from './profiles.js'
import { UsersService } from './users.js'

/** What the services are built from: the ports and the deployment's settings. */
export interface ServicesOptions {
  store: Store
  cipher: Cipher
  clock?: Clock
  logger?: Logger
  catalog?: ModelCatalog
  /** Operator token (`BERTH_ADMIN_TOKEN`). */
  adminToken?: string | undefined
  /** Version reported by `GET /health`. */
  version?: string
  /** The warm container pool; without one, stats are zeros and no container exists. */
  pool?: ContainerPool
}

/** Every service a route handler can reach through `ctx.services`. */
export interface Services {
  version: string
  clock: Clock
  logger: Logger
  users: UsersService
  apiKeys: ApiKeysService
  profiles: ProfilesService
  memory: MemoryService
  secrets: SecretsService
  tools: ToolsService
  skills: SkillsService
  agents: AgentsService
  pool: Pick<ContainerPool, 'stats' | 'list' | 'forceRemove'>
}

/** The pool surface when no container runtime is configured. */
const noPool: Services['pool'] = {
  stats: (): PoolStats => ({ min: 0, max: 0, in_use: 0, idle: 0 }),
  list: (): PooledContainer[] => [],
  forceRemove: async (id: string) => {
    throw notFound('container', id)
  },
}

/**
 * Build the services over the given ports.
 *
 * @example
 * ```ts
 * const services = createServices({ store, cipher: createAesGcmCipher(key) })
 * await services.profiles.list('usr_1', { page: 1, limit: 20 })
 * ```
 */
export function createServices(opts: ServicesOptions): Services {
  const clock = opts.clock ?? systemClock
  const { store, cipher } = opts
  const apiKeys = new ApiKeysService(store, cipher, clock, opts.catalog ?? staticCatalog(DEFAULT_MODELS))
  return {
    version: opts.version ?? '0.0.0',
    clock,
    logger: opts.logger ?? silentLogger,
    users: new UsersService({ store, clock, adminToken: opts.adminToken }),
    apiKeys,
    profiles: new ProfilesService(store, clock, apiKeys),
    memory: new MemoryService(store, clock),
    secrets: createSecretsService(store, clock, cipher),
    tools: createToolsService(store, clock),
    skills: createSkillsService(store, clock),
    agents: createAgentsService(store, clock),
    pool: opts.pool ?? noPool,
  }
}
