import type { IndexEntry } from '../ports/store.js'

/** How records of one kind are ordered and filtered in their list. */
export interface IndexSpec {
  /** Sort key (highest first). Default: `created_at`, then id: newest first. */
  order?(record: IndexedRecord): string
  /** Filter terms (each one its own counted index), e.g. `status=running`. */
  terms?(record: IndexedRecord): string[]
}

/** The fields the index specs read. */
export type IndexedRecord = { id: string; created_at: string } & Record<string, unknown>

/**
 * A filter term from several `field=value` parts, in a fixed order, leaving out the
 * absent ones: `undefined` when nothing filters (the whole list).
 *
 * @example
 * ```ts
 * term({ mode: 'batch', status: undefined }) // 'mode=batch'
 * ```
 */
export function term(parts: Record<string, string | null | undefined>): string | undefined {
  const set = Object.keys(parts)
    .sort()
    .filter((k) => parts[k] !== undefined && parts[k] !== null)
  return set.length ? set.map((k) => `${k}=${parts[k]}`).join(',') : undefined
}

/** Every combination of the present parts, so a filter on any subset reads one index. */
function combos(parts: Record<string, string | null | undefined>): string[] {
  const keys = Object.keys(parts).filter((k) => parts[k] !== undefined && parts[k] !== null)
  const out: string[] = []
  for (let mask = 1; mask < 1 << keys.length; mask++) {
    out.push(term(Object.fromEntries(keys.filter((_, i) => mask & (1 << i)).map((k) => [k, parts[k]])))!)
  }
  return out
}

/** `order` numbers (microsecond sequence) of runs, deliveries and chat events, fixed width. */
const byOrderField = (r: IndexedRecord) => `${String(r.order ?? 0).padStart(20, '0')}|${r.id}`
const str = (v: unknown) => (typeof v === 'string' ? v : undefined)
/** A value read from a nested object, usable in a term (terms are `,`-joined `k=v` pairs). */
const termValue = (v: unknown) => (typeof v === 'string' && !/[,=]/.test(v) ? v : undefined)

/** Audit entries, newest first (`created_at` is the entry's time), by actor (its id, or its type), action and target id. */
const auditIndex: IndexSpec = {
  terms: (r) => {
    const actor = r.actor as { type?: unknown; id?: unknown } | undefined
    const target = r.target as { id?: unknown } | undefined
    return combos({
      actor: termValue(actor?.id ?? actor?.type),
      action: str(r.action),
      target: termValue(target?.id),
    })
  },
}

/**
 * Every listed kind, by the first segment of its keys. The lists' filters are index
 * terms; the migration and rebuilt indexes use the same table, so they always agree.
 */
export const INDEXES: Record<string, IndexSpec> = {
  tasks: { terms: (r) => combos({ status: str(r.status), mode: str(r.mode) }) },
  // Playbook-only workspaces (`pb-` sessions) stay out of the list unless claimed as a thread.
  workspaces: {
    terms: (r) => {
      const listed = !String(r.session_id ?? '').startsWith('pb-') || Boolean(r.thread_claimed)
      return listed ? ['listed', `listed,status=${str(r.status)}`] : []
    },
  },
  memory: { terms: (r) => combos({ profile_id: str(r.profile_id), type: str(r.type) }) },
  integrations: { terms: (r) => combos({ type: str(r.type) }) },
  'git-accounts': { terms: (r) => combos({ provider: str(r.provider) }) },
  'playbook-runs': { order: byOrderField },
  'integration-deliveries': { order: byOrderField },
  'chatprovider-events': { order: byOrderField },
  profiles: {},
  previews: { terms: (r) => combos({ workspace: str(r.workspace_id) }) },
  secrets: {},
  tools: {},
  skills: {},
  agents: {},
  apikeys: {},
  environments: {},
  playbooks: { terms: (r) => combos({ profile_id: str(r.profile_id) }) },
  // A task's permission requests, the pending ones on their own (`GET /v1/tasks/:id/approvals`).
  approvals: { terms: (r) => combos({ task_id: str(r.task_id), status: str(r.status) }) },
  users: {},
  // The deployment's audit log (`audit:<id>`) and each user's copy (`audit-own:<user>:<id>`).
  audit: auditIndex,
  'audit-own': auditIndex,
}

/**
 * A record's place in its kind's list (its index `order`): what a cursor remembers of the
 * last record of a page.
 *
 * @example
 * ```ts
 * listOrder('tasks', task) // '2026-…|task_1'
 * ```
 */
export function listOrder(kind: string, record: object): string {
  const r = record as IndexedRecord
  // A collection's kind may carry a parent id (`playbook-runs:<playbook>`): the spec is its first segment's.
  const order = INDEXES[kind.split(':', 1)[0]!]?.order
  return order ? order(r) : `${r.created_at}|${r.id}`
}

/**
 * The index entry of a stored record, or `null` when its kind is not listed (or the value
 * is not a record). The scope is the key without its last `:<id>` segment.
 *
 * @example
 * ```ts
 * indexEntryFor('tasks:usr_1:task_1', task) // { scope: 'tasks:usr_1', order: '2026-…|task_1', terms: [...] }
 * ```
 */
export function indexEntryFor(key: string, value: unknown): IndexEntry | null {
  const spec = INDEXES[key.slice(0, key.indexOf(':'))]
  const cut = key.lastIndexOf(':')
  if (!spec || cut < 0 || typeof value !== 'object' || value === null) return null
  const r = value as IndexedRecord
  if (typeof r.id !== 'string' || typeof r.created_at !== 'string' || key.slice(cut + 1) !== r.id) return null
  return {
    scope: key.slice(0, cut),
    order: listOrder(key.slice(0, key.indexOf(':')), r),
    terms: spec.terms?.(r) ?? [],
  }
}
