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
import { ConcurrencySlots } from '../limits/concurrency.js'
import { EventBus } from './event-bus.js'
import { EventLog } from './event-log.js'
import { MemoryService } from './memory.js'
import { TasksService, type TaskEngine } from './tasks.js'
import { WorkspacesService } from './workspaces.js'
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
  /** How tasks get containers and start the runner; without it, submitting a task is a 502. */
  engine?: TaskEngine
  /** Running workspaces per profile (default 5). */
  concurrency?: number
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** After a restart, how long to wait for a runner still at work (default 30 s). */
  recoveryGraceMs?: number
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
  workspaces: WorkspacesService
  tasks: TasksService
  eventLog: EventLog
  bus: EventBus
  slots: ConcurrencySlots
  /** Delete a workspace for good: stop its tasks, reap its container and volume, drop its log and row. */
  deleteWorkspace(owner: string, id: string): Promise<void>
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
  const profiles = new ProfilesService(store, clock, apiKeys)
  const memory = new MemoryService(store, clock)
  const secrets = createSecretsService(store, clock, cipher)
  const tools = createToolsService(store, clock)
  const skills = createSkillsService(store, clock)
  const agents = createAgentsService(store, clock)
  const workspaces = new WorkspacesService(store, clock)
  const eventLog = new EventLog(store, clock)
  const bus = new EventBus()
  const slots = new ConcurrencySlots(opts.concurrency ?? 5)
  const logger = opts.logger ?? silentLogger
  const tasks = new TasksService({
    store,
    clock,
    logger,
    eventLog,
    bus,
    slots,
    profiles,
    workspaces,
    catalog: { apiKeys, secrets, memory, tools, skills, agents },
    engine: opts.engine,
    ...(opts.sessionIdleMs !== undefined && { sessionIdleMs: opts.sessionIdleMs }),
    ...(opts.recoveryGraceMs !== undefined && { recoveryGraceMs: opts.recoveryGraceMs }),
  })
  return {
    version: opts.version ?? '0.0.0',
    clock,
    logger,
    users: new UsersService({ store, clock, adminToken: opts.adminToken }),
    apiKeys,
    profiles,
    memory,
    secrets,
    tools,
    skills,
    agents,
    pool: opts.pool ?? noPool,
    workspaces,
    tasks,
    eventLog,
    bus,
    slots,
    async deleteWorkspace(owner, id) {
      const ws = await workspaces.records.get(owner, id)
      await tasks.stopWorkspace(owner, id)
      if (ws.volume && opts.engine) {
        await opts.engine.runtime.removeVolume(ws.volume).catch((err: unknown) => logger.warn('could not remove a workspace volume', { volume: ws.volume, error: String(err) }))
      }
      await eventLog.remove(owner, id)
      await store.remove(`ws-conversations:${owner}:${id}`)
      await workspaces.removeRecord(owner, id)
    },
  }
}
