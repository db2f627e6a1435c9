/** routes/: the route table: one file per area, each a list of defineRoute() declarations; this index joins them in one table. */
import type { AnyRoute } from '../route.js'
import {
  agentRoutes,
  apiKeyRoutes,
  listProfileModels,
  memoryRoutes,
  profileRoutes,
  secretRoutes,
  skillRoutes,
  toolRoutes,
} from './resources.js'
import { poolRoutes } from './pool.js'
import { taskRoutes } from './tasks.js'
import { workspaceRoutes } from './workspaces.js'
import { workspaceFileRoutes } from './workspace-files.js'
import { workspaceForkRoutes } from './workspace-fork.js'
import { previewRoutes } from './previews.js'
import { wsRoute } from './ws.js'
import { adminRoutes, health, healthReady, metrics } from './system.js'
import { adminViewRoutes } from './admin-views.js'
import { playbookRoutes } from './playbooks.js'
import { playbookWebhookTrigger } from './webhook-trigger.js'
import { integrationRoutes } from './integrations.js'
import { gitAccountRoutes } from './git-accounts.js'
import { chatMailRoutes } from './chat-mail.js'
import { bankProviderRoutes } from './bank-provider.js'
import { messengerRoutes } from './messenger-bot.js'
import { environmentRoutes } from './environments.js'
import { auditRoutes } from './audit.js'
import { usageRoutes } from './usage.js'

/**
 * The route table: every operation of the HTTP API, declared once. The server attaches a
 * handler to each and mounts it, the OpenAPI document is built from it, the client is typed
 * from it and the contract tests iterate it.
 */
export const routes = [
  health,
  metrics,
  healthReady,
  ...taskRoutes,
  ...workspaceRoutes,
  ...workspaceFileRoutes,
  ...workspaceForkRoutes,
  ...previewRoutes,
  ...profileRoutes,
  listProfileModels,
  ...environmentRoutes,
  ...apiKeyRoutes,
  ...memoryRoutes,
  ...secretRoutes,
  ...toolRoutes,
  ...skillRoutes,
  ...agentRoutes,
  ...poolRoutes,
  ...playbookRoutes,
  playbookWebhookTrigger,
  ...integrationRoutes,
  ...gitAccountRoutes,
  ...chatMailRoutes,
  ...bankProviderRoutes,
  ...messengerRoutes,
  wsRoute,
  ...adminRoutes,
  ...adminViewRoutes,
  ...auditRoutes,
  ...usageRoutes,
] as const satisfies readonly AnyRoute[]

/** The route table's type: the client derives its methods from it. */
export type Routes = typeof routes
