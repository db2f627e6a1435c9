import { api, ApiError, describeError } from '../../api.js'
import { h, replace } from '../../dom.js'
import { table } from './parts.js'

interface Limits {
  rate: {
    rpm: number
    burst: number
    callers: { caller_id: string; remaining: number; reset_seconds: number }[]
  } | null
  concurrency: {
    limit: number
    profiles: { profile_id: string; owner_id: string | null; running: number; workspace_ids: string[] }[]
  }
}

/**
 * Rate and concurrency per caller (`GET /admin/limits`): requests left in each bucket that
 * is not full, running workspaces per profile and owner.
 *
 * @example
 * ```ts
 * const limits = limitsSection()
 * page.append(limits.el)
 * await limits.load()
 * ```
 */
export function limitsSection(): { el: HTMLElement; load(): Promise<void> } {
  const limitsEl = h('div')
  const loadLimits = async () => {
    try {
      const l = await api<Limits>('/admin/limits', { admin: true })
      replace(
        limitsEl,
        h('h3', null, 'Rate limit'),
        l.rate
          ? h(
              'p',
              { class: 'muted small' },
              `${l.rate.burst} requests at once per caller, refilled at ${l.rate.rpm} per minute. Callers not listed have their whole bucket.`,
            )
          : h('p', { class: 'muted small' }, 'This server runs a rate limiter without state to show.'),
        l.rate
          ? table(
              'Rate limit per caller',
              ['Caller', 'Requests left', 'Full again in'],
              l.rate.callers.map((c) =>
                h(
                  'tr',
                  null,
                  h('td', { class: 'mono small' }, c.caller_id),
                  h('td', { class: 'num' }, `${c.remaining} / ${l.rate!.burst}`),
                  h('td', { class: 'num' }, `${c.reset_seconds} s`),
                ),
              ),
              'Every caller has its whole bucket.',
            )
          : null,
        h('h3', { class: 'spaced' }, 'Concurrency'),
        h('p', { class: 'muted small' }, `${l.concurrency.limit} running workspaces per profile.`),
        table(
          'Running workspaces per profile and owner',
          ['Owner', 'Profile', 'Running'],
          l.concurrency.profiles.map((p) =>
            h(
              'tr',
              null,
              h('td', { class: 'mono small' }, p.owner_id ?? '—'),
              h('td', { class: 'mono small' }, p.profile_id),
              h('td', { class: 'num' }, `${p.running} / ${l.concurrency.limit}`),
            ),
          ),
          'No workspace is running.',
        ),
      )
    } catch (err) {
      replace(
        limitsEl,
        h('p', { class: err instanceof ApiError && err.status === 404 ? 'muted' : 'error-text' }, describeError(err)),
      )
    }
  }

  return {
    el: h(
      'section',
      { class: 'card', 'aria-labelledby': 'h-limits' },
      h('h2', { id: 'h-limits' }, 'Rate and concurrency per caller'),
      limitsEl,
    ),
    load: loadLimits,
  }
}
