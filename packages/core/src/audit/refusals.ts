/** What each counted refusal's audit entry says: failed authentication, ids a caller does not have, egress refused. */
import type { Caller } from '../caller.js'
import type { CountedEntry, MinuteCounts } from './counted.js'

/** The arguments of one {@link MinuteCounts.note}. */
type Note = Parameters<MinuteCounts['note']>

/** A request of a task's agent the egress proxy refused. */
export interface EgressRefusal {
  task_id: string
  /** The task's owner (it sees the entry), when the grant names it. */
  owner_id?: string | undefined
  host: string
  port: number
  /** The proxy's answer: 403 (the policy refused) or 502 (the name did not resolve). */
  status: number
  /** Why, as a word (`not_allowlisted`, `private_address`, ...): entries are counted per reason. */
  code: string
  /** Why, as the proxy told the agent (the first of the minute's). */
  reason: string
}

/** Distinct hosts counted per task and minute; a task's further hosts go to one `*` entry. */
const HOSTS_PER_TASK = 20

/** An id or name as a target id: plain characters, at most 253 (longer or stranger ones as `invalid`). */
const plain = (text: string) => (/^[A-Za-z0-9_.:*-]{1,253}$/.test(text) ? text : 'invalid')

/** A request without valid credentials from `address`: one entry per address and minute (its id derived from the address alone). */
export function failedAuthCount(address: string, requestId: string | null): Note {
  const entry = (a: string): CountedEntry => ({
    action: 'auth.failed',
    actor: { type: 'anonymous', id: null },
    target: { type: 'address', id: a },
    request_id: requestId,
    source: a,
    details: {},
    owners: [],
  })
  return [address, () => entry(address), () => ({ key: 'other', entry: entry('other') })]
}

/**
 * A 404 for an id `caller` asked for: one entry per caller, kind, route (or WebSocket
 * message) and minute, naming the first id (the caller sees it: it holds only what it sent).
 */
export function deniedCount(
  caller: Caller,
  where: string,
  resource: { kind: string; id: string },
  requestId: string | null,
  source: string | null,
): Note {
  const kind = resource.kind.replace(/\s+/g, '_')
  const entry = (id: string | null, owners: string[]): CountedEntry => ({
    action: 'access.denied',
    // Past the cap one entry pools every caller's: it names none.
    actor: { type: caller.role, id: owners[0] ?? null },
    target: { type: kind, id },
    request_id: requestId,
    source,
    details: { where },
    owners,
  })
  return [
    `access.denied|${caller.id}|${kind}|${where}`,
    () => entry(plain(resource.id), [caller.id]),
    () => ({ key: `access.denied|other|${kind}|${where}`, entry: entry(null, []) }),
  ]
}

/**
 * An egress refusal: one entry per task, host, reason and minute, owned by the task's
 * owner. A task's hosts past {@link HOSTS_PER_TASK} in a minute count under host `*`, so an
 * agent that sprays names makes at most 21 entries a minute per reason.
 */
export function egressCount(r: EgressRefusal): Note {
  const entry = (host: string): CountedEntry => ({
    action: 'egress.refused',
    actor: { type: 'system', id: null },
    target: { type: 'host', id: host },
    request_id: null,
    source: null,
    details: { task_id: r.task_id, reason: r.code, status: r.status, port: r.port, message: r.reason.slice(0, 500) },
    owners: r.owner_id ? [r.owner_id] : [],
  })
  const prefix = `egress.refused|${r.task_id}|${r.code}`
  const host = plain(r.host.toLowerCase())
  return [
    `${prefix}|${host}`,
    () => entry(host),
    () => ({ key: `${prefix}|*`, entry: entry('*') }),
    { name: `egress|${r.task_id}`, max: HOSTS_PER_TASK },
  ]
}
