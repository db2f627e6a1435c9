/** The usage report: the ledger's day documents of a range, summed per caller and group. */
import { USAGE_MAX_DAYS, validationError, type UsageFigures, type UsageGroup, type UsageReport } from '@berth/contract'
import { addFigures, dayOf, emptyFigures, type UsageLedger } from './ledger.js'

const DAY_MS = 86_400_000

/**
 * The usage of one caller (or every caller) from `from` to `to` (UTC days, both included;
 * default this month so far), grouped by day, profile or model. A range that ends before
 * it starts, or spans more than {@link USAGE_MAX_DAYS} days, is 400.
 *
 * @example
 * ```ts
 * await usageReport(ledger, Date.now(), { owner: 'usr_1', group_by: 'model' })
 * // { from: '2026-11-01', to: '2026-11-26', group_by: 'model', groups: [{ user_id, key: 'claude-sonnet-4-5', cost_usd, ... }], total }
 * ```
 */
export async function usageReport(
  ledger: UsageLedger,
  now: number,
  q: {
    owner?: string | undefined
    from?: string | undefined
    to?: string | undefined
    group_by: UsageReport['group_by']
  },
): Promise<UsageReport> {
  const to = q.to ?? dayOf(now)
  const from = q.from ?? `${to.slice(0, 7)}-01`
  if (from > to)
    throw validationError([{ location: 'query', path: 'from', message: `from (${from}) is after to (${to})` }])
  const days = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / DAY_MS + 1
  if (days > USAGE_MAX_DAYS)
    throw validationError([
      { location: 'query', path: 'to', message: `the range spans ${days} days; at most ${USAGE_MAX_DAYS}` },
    ])
  const rows = new Map<string, UsageGroup>()
  const total = emptyFigures()
  for (const { user_id, day, doc } of await ledger.days(q.owner, from, to)) {
    for (const g of Object.values(doc.groups)) {
      const key = q.group_by === 'day' ? day : q.group_by === 'profile' ? g.profile_id : g.model
      const id = `${user_id} ${key}`
      const row = rows.get(id) ?? { user_id, key, ...emptyFigures() }
      const figures: UsageFigures = { ...g }
      addFigures(row, figures)
      addFigures(total, figures)
      rows.set(id, row)
    }
  }
  const groups = [...rows.values()].map((r) => toView(r))
  groups.sort((a, b) =>
    q.group_by === 'day'
      ? a.key.localeCompare(b.key) || a.user_id.localeCompare(b.user_id)
      : b.cost_usd - a.cost_usd || a.key.localeCompare(b.key),
  )
  return { from, to, group_by: q.group_by, groups, total: toView(total) }
}

/** Only the report's fields, cost rounded to a millionth of a dollar (sums of floats drift). */
function toView<T extends UsageFigures>(r: T): T {
  const out = { ...r, cost_usd: Math.round(r.cost_usd * 1e6) / 1e6 }
  for (const k of ['profile_id', 'model'] as const) delete (out as Record<string, unknown>)[k]
  return out
}
