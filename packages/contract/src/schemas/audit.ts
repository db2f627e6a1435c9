import * as v from 'valibot'
import { Id, PageQuery, Timestamp } from './common.js'
import { maxLength } from './length.js'

/**
 * Every action the audit log records: who changed users, keys, credentials, secrets,
 * environments, profiles, tools, skills, agents, memory, playbooks, integrations, Git
 * accounts, workspaces, preview links and limits; who force-removed a container, decided an
 * approval, cancelled or interrupted a task; and what was refused: requests that failed
 * authentication (`auth.failed`, one entry per source address and minute with a `count`),
 * asked for an admin operation without the role (`auth.forbidden`), or named a resource the
 * caller does not have (`access.denied`, one entry per caller, kind and minute with a
 * `count`), and agents' requests the egress proxy refused (`egress.refused`, one entry per
 * task, host, reason and minute with a `count`). A decision that lost a race (a second
 * approval decision, a cancel of a task already ended) is its action with outcome `failure`.
 */
export const AUDIT_ACTIONS = [
  'user.created',
  'user.deleted',
  'key.issued',
  'key.revoked',
  'credential.created',
  'credential.updated',
  'credential.deleted',
  'secret.created',
  'secret.updated',
  'secret.deleted',
  'environment.created',
  'environment.updated',
  'environment.deleted',
  'integration.created',
  'integration.updated',
  'integration.deleted',
  'git_account.connected',
  'git_account.disconnected',
  'container.force_removed',
  'approval.decided',
  'auth.failed',
  'auth.forbidden',
  'profile.created',
  'profile.updated',
  'profile.deleted',
  'tool.created',
  'tool.updated',
  'tool.deleted',
  'skill.created',
  'skill.updated',
  'skill.deleted',
  'agent.created',
  'agent.updated',
  'agent.deleted',
  'memory.created',
  'memory.updated',
  'memory.deleted',
  'playbook.created',
  'playbook.updated',
  'playbook.deleted',
  'playbook.webhook_secret_rotated',
  'workspace.updated',
  'workspace.deleted',
  'workspace.stopped',
  'workspace.forked',
  'workspace.rewound',
  'preview.created',
  'preview.revoked',
  'limits.set',
  'task.cancelled',
  'task.interrupted',
  'access.denied',
  'egress.refused',
] as const

export const AuditAction = v.picklist(AUDIT_ACTIONS)

/** Who acted: a caller (`user` or `admin`, with its id), Berth itself (`system`), or an unauthenticated request (`anonymous`). */
export const AuditActor = v.object({
  type: v.picklist(['admin', 'user', 'system', 'anonymous']),
  id: v.nullable(v.string()),
})

/** What was acted on: a kind (`user`, `caller_key`, `credential`, `secret`, `address`, ...) and its id. */
export const AuditTarget = v.object({
  type: v.string(),
  id: v.nullable(v.string()),
})

/**
 * One entry of the audit log. It never holds a secret value: targets are ids and `details`
 * carries names, ids and counts only.
 */
export const AuditEntry = v.object({
  id: Id('audit'),
  at: Timestamp,
  actor: AuditActor,
  action: AuditAction,
  target: AuditTarget,
  outcome: v.picklist(['success', 'failure']),
  /** The request that did it (its `x-request-id`), or null outside a request. */
  request_id: v.nullable(v.string()),
  /** The client address of that request, or null. */
  source: v.nullable(v.string()),
  details: v.optional(v.record(v.string(), v.union([v.string(), v.number(), v.boolean(), v.null()]))),
})

/** An actor id (`usr_…`), or `system` / `anonymous`; a target id (or a client address). No `,` or `=`: they are index terms. */
const FilterValue = v.pipe(v.string(), maxLength(200), v.regex(/^[A-Za-z0-9_.:-]+$/, 'must be an id'))

/** Filters of the audit lists: each narrows the list; `from` and `to` are inclusive. */
export const AuditQuery = v.object({
  ...PageQuery,
  actor: v.optional(FilterValue),
  action: v.optional(AuditAction),
  target: v.optional(FilterValue),
  from: v.optional(Timestamp),
  to: v.optional(Timestamp),
})

export type AuditAction = v.InferOutput<typeof AuditAction>
export type AuditActor = v.InferOutput<typeof AuditActor>
export type AuditTarget = v.InferOutput<typeof AuditTarget>
export type AuditEntry = v.InferOutput<typeof AuditEntry>
export type AuditQuery = v.InferOutput<typeof AuditQuery>
