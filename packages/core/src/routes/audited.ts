/**
 * The routes whose calls the audit log records, in one table: each names its action and
 * target, and {@link withAudit} wraps their handlers so that a success, or a 409 CONFLICT
 * (outcome `failure`), leaves an entry. What also happens outside the routes (approvals,
 * cancels and interrupts over the WebSocket and the messenger, integrations a connect flow
 * makes, Git accounts) is recorded by its service instead.
 */
import type { AuditAction } from '@berth/contract'
import type { AuditDetails, AuditInput } from '../audit/log.js'
import type { AnyRoute, HandlerMap } from '../route.js'

type Params = Record<string, string>
type Answer = Record<string, unknown> | undefined

/** What one route's call records. */
interface RouteAudit {
  action: AuditAction
  /** The target's kind. */
  target: string
  /** Where the target's id is: a path parameter, or the answer's `id` (a create). */
  id: 'answer' | 'id' | 'preview_id'
  /** The path's `id` is a user the action concerns besides the actor (it sees the entry too). */
  ownerParam?: true
  /** Names and ids besides the target, from the path and (on success) the answer. */
  details?: (params: Params, answer: Answer) => AuditDetails
}

/** The create, update and delete routes of a CRUD area, recorded as `<kind>.created` etc. */
function crud(area: string, kind: string): Record<string, RouteAudit> {
  return {
    [`${area}.create`]: { action: `${kind}.created` as AuditAction, target: kind, id: 'answer' },
    [`${area}.update`]: { action: `${kind}.updated` as AuditAction, target: kind, id: 'id' },
    [`${area}.delete`]: { action: `${kind}.deleted` as AuditAction, target: kind, id: 'id' },
  }
}

const str = (value: unknown) => (typeof value === 'string' || typeof value === 'number' ? value : null)

/** Every audited route by name (docs/OPERATIONS.md lists them with the rest of the log's actions). */
const AUDITED: Partial<Record<keyof HandlerMap, RouteAudit>> = {
  ...crud('api-keys', 'credential'),
  ...crud('secrets', 'secret'),
  ...crud('environments', 'environment'),
  ...crud('profiles', 'profile'),
  ...crud('tools', 'tool'),
  ...crud('skills', 'skill'),
  ...crud('agents', 'agent'),
  ...crud('memory', 'memory'),
  ...crud('playbooks', 'playbook'),
  'playbooks.rotateWebhookSecret': { action: 'playbook.webhook_secret_rotated', target: 'playbook', id: 'id' },
  'workspaces.update': { action: 'workspace.updated', target: 'workspace', id: 'id' },
  'workspaces.delete': { action: 'workspace.deleted', target: 'workspace', id: 'id' },
  'workspaces.stop': { action: 'workspace.stopped', target: 'workspace', id: 'id' },
  'workspaces.fork': {
    action: 'workspace.forked',
    target: 'workspace',
    id: 'answer',
    details: (p) => ({ forked_from: p.id ?? null }),
  },
  'workspaces.rewind': { action: 'workspace.rewound', target: 'workspace', id: 'id' },
  'workspaces.previews.create': {
    action: 'preview.created',
    target: 'preview',
    id: 'answer',
    details: (p, answer) => ({
      workspace_id: p.id ?? null,
      port: str(answer?.port),
      expires_at: str(answer?.expires_at),
    }),
  },
  'workspaces.previews.revoke': {
    action: 'preview.revoked',
    target: 'preview',
    id: 'preview_id',
    details: (p) => ({ workspace_id: p.id ?? null }),
  },
  'admin.limits.set': { action: 'limits.set', target: 'user', id: 'id', ownerParam: true },
}

/** The entry of a call of `spec` (the answer is undefined when it failed). */
function entryOf(spec: RouteAudit, params: Params, answer: Answer): AuditInput {
  const id = spec.id === 'answer' ? str(answer?.id) : (params[spec.id] ?? null)
  const entry: AuditInput = { action: spec.action, target: { type: spec.target, id: id === null ? null : String(id) } }
  if (spec.ownerParam) entry.owner = params.id
  const details = spec.details?.(params, answer)
  if (details) entry.details = details
  return entry
}

/** The table with the handlers of audited routes wrapped: a call is recorded once it succeeds, or as a failure when it answers 409 CONFLICT. */
export function withAudit(routes: AnyRoute[]): AnyRoute[] {
  const names = new Set(routes.map((route) => route.name))
  for (const name of Object.keys(AUDITED))
    if (!names.has(name)) throw new Error(`audited route ${name} is not declared`)
  return routes.map((route) => {
    const spec = AUDITED[route.name as keyof HandlerMap]
    if (!spec) return route
    const handle: AnyRoute['handle'] = (ctx) => {
      const params = (ctx.params ?? {}) as Params
      return ctx.services.audit.attempt(
        entryOf(spec, params, undefined),
        () => route.handle(ctx),
        (answer) => entryOf(spec, params, answer as Answer),
      )
    }
    return { ...route, handle }
  })
}
