import { AUDIT_ACTIONS, type AuditEntry } from '@berth/contract'
import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson, printTable } from '../context.js'

const filters = {
  actor: { type: 'string', description: 'Only entries of this actor (a caller id, system or anonymous)' },
  action: { type: 'string', description: `Only this action (${AUDIT_ACTIONS.join(', ')})` },
  target: { type: 'string', description: 'Only entries on this id (or client address)' },
  from: { type: 'string', description: 'From this time (ISO 8601, inclusive)' },
  to: { type: 'string', description: 'Up to this time (ISO 8601, inclusive)' },
  limit: { type: 'string', description: 'Entries per page (1-100, default 20)' },
  page: { type: 'string', description: 'Page, from 1' },
  all: { type: 'boolean', description: "The whole deployment's log (an admin key)" },
} as const

/** The entry's details as `k=v` pairs (names, ids and counts only). */
const detailsOf = (e: AuditEntry) =>
  Object.entries(e.details ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')

/** `berth audit`: your audit entries, or with `--all` (admin) the deployment's. */
export const auditCommand = defineCommand({
  meta: { name: 'audit', description: 'List audit entries, newest first (--all: the whole deployment, admin)' },
  args: { ...commonArgs, ...filters },
  run: ({ args }) =>
    action(async () => {
      const query = {
        ...(args.actor && { actor: args.actor }),
        ...(args.action && { action: args.action as AuditEntry['action'] }),
        ...(args.target && { target: args.target }),
        ...(args.from && { from: args.from }),
        ...(args.to && { to: args.to }),
        ...(args.limit && { limit: Number(args.limit) }),
        ...(args.page && { page: Number(args.page) }),
      }
      const client = clientFor(args)
      const { entries, total } = args.all
        ? await client.admin.audit.list({ query })
        : await client.audit.list({ query })
      if (args.json) return printJson({ entries, total })
      printTable([
        ['TIME', 'ACTION', 'OUTCOME', 'ACTOR', 'TARGET', 'SOURCE', 'DETAILS'],
        ...entries.map((e) => [
          e.at,
          e.action,
          e.outcome,
          e.actor.id ?? e.actor.type,
          `${e.target.type}:${e.target.id ?? '-'}`,
          e.source ?? '-',
          detailsOf(e),
        ]),
      ])
      log.info(`${entries.length} of ${total}`)
    }),
})
