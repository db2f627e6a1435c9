import type { AnyRoute } from '../route.js'
import { agentRoutes, apiKeyRoutes, listProfileModels, memoryRoutes, profileRoutes, secretRoutes, skillRoutes, toolRoutes } from './resources.js'
import { poolRoutes } from './pool.js'
import { taskRoutes } from './tasks.js'
import { workspaceRoutes } from './workspaces.js'
import { wsRoute } from './ws.js'
import { adminRoutes, health } from './system.js'

/**
 * The route table: every operation of the HTTP API, defined once. The server mounts it,
 * the OpenAPI document is built from it, the client is typed from it and the contract
 * tests iterate it.
 */
export const routes = [
  health,
  ...taskRoutes,
  ...workspaceRoutes,
  ...profileRoutes,
  listProfileModels,
  ...apiKeyRoutes,
  ...memoryRoutes,
  ...secretRoutes,
  ...toolRoutes,
  ...skillRoutes,
  ...agentRoutes,
  ...poolRoutes,
  wsRoute,
  ...adminRoutes,
] as const satisfies readonly AnyRoute[]

/** The route table's type: the client derives its methods from it. */
export type Routes = typeof routes
