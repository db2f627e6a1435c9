import { defineRoute } from '../route.js'
import { ListOf } from '../schemas/common.js'
import { AuditEntry, AuditQuery } from '../schemas/audit.js'

const FILTERS =
  'Newest first. Filters: `actor` (a caller id, or `system` / `anonymous`), `action`, `target` (an id, or a client address for `auth.failed`), `from` and `to` (inclusive timestamps).'

export const auditRoutes = [
  defineRoute({
    name: 'admin.audit.list',
    method: 'GET',
    path: '/admin/audit',
    auth: 'admin',
    tag: 'admin',
    summary: 'The audit log of the whole deployment (admin)',
    description: `${FILTERS} Entries are kept for \`BERTH_AUDIT_RETENTION_DAYS\` and never hold a secret value.`,
    query: AuditQuery,
    response: ListOf('entries', AuditEntry),
  }),
  defineRoute({
    name: 'audit.list',
    method: 'GET',
    path: '/v1/audit',
    auth: 'caller',
    tag: 'audit',
    summary: 'Your audit entries: what you did, and what an admin did to your user and keys',
    description: FILTERS,
    query: AuditQuery,
    response: ListOf('entries', AuditEntry),
  }),
] as const
