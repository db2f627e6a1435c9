import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const auditHandlers = defineHandlers({
  'admin.audit.list': (ctx) =>
    listPage('admin.audit.list', 'entries', ctx, (page, filter) =>
      ctx.services.audit.list(null, { ...page, ...filter }),
    ),
  'audit.list': (ctx) =>
    listPage('audit.list', 'entries', ctx, (page, filter) =>
      ctx.services.audit.list(ctx.caller.id, { ...page, ...filter }),
    ),
})
