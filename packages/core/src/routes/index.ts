/**
 * routes/: the handlers of the contract's route table, one file per area beside the
 * declarations in `@berth/contract`; this index joins them into the table the server mounts.
 */
import { routes as declared } from '@berth/contract'
import { attachHandlers } from '../route.js'
import { withAudit } from './audited.js'
import { adminViewHandlers } from './admin-views.js'
import { auditHandlers } from './audit.js'
import { bankProviderHandlers } from './bank-provider.js'
import { chatMailHandlers } from './chat-mail.js'
import { environmentHandlers } from './environments.js'
import { gitAccountHandlers } from './git-accounts.js'
import { integrationHandlers } from './integrations.js'
import { messengerHandlers } from './messenger-bot.js'
import { playbookHandlers } from './playbooks.js'
import { poolHandlers } from './pool.js'
import { previewHandlers } from './previews.js'
import { resourceHandlers } from './resources.js'
import { systemHandlers } from './system.js'
import { taskHandlers } from './tasks.js'
import { usageHandlers } from './usage.js'
import { webhookTriggerHandlers } from './webhook-trigger.js'
import { workspaceFileHandlers } from './workspace-files.js'
import { workspaceForkHandlers } from './workspace-fork.js'
import { workspaceHandlers } from './workspaces.js'
import { wsHandlers } from './ws.js'

/**
 * The route table with its handlers, in the contract's order: the server mounts it and the
 * OpenAPI document is built from it. The compiler checks that every declared route has
 * exactly one handler; the audited ones record their calls (`audited.ts`).
 */
export const routes = withAudit(
  attachHandlers(declared, {
    ...systemHandlers,
    ...taskHandlers,
    ...workspaceHandlers,
    ...workspaceFileHandlers,
    ...workspaceForkHandlers,
    ...previewHandlers,
    ...resourceHandlers,
    ...environmentHandlers,
    ...poolHandlers,
    ...playbookHandlers,
    ...webhookTriggerHandlers,
    ...integrationHandlers,
    ...gitAccountHandlers,
    ...chatMailHandlers,
    ...bankProviderHandlers,
    ...messengerHandlers,
    ...wsHandlers,
    ...adminViewHandlers,
    ...auditHandlers,
    ...usageHandlers,
  }),
)
