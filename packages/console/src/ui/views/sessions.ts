import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { age, statusClass } from '../format.js'
import { go, type View } from './view.js'

interface Workspace {
  id: string
  session_id: string
  profile_id: string | null
  status: string
  name: string
  last_active_at: string
}

/** Sessions (workspaces): status, activity; opening one shows its conversation and files. *
 * @example
 * ```ts
 * sessionsView() // #/sessions
 * ```
 */
export function sessionsView(): View {
  const body = h('tbody')
  const status = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…')
  void (async () => {
    try {
      const { workspaces, total } = await api<{ workspaces: Workspace[]; total: number }>('/v1/workspaces?limit=100')
      status.textContent = `${total} session${total === 1 ? '' : 's'}`
      replace(
        body,
        ...workspaces.map((w) =>
          h(
            'tr',
            null,
            h(
              'td',
              null,
              h(
                'button',
                {
                  type: 'button',
                  class: 'link',
                  'aria-label': `${w.name} (${w.session_id})`,
                  // The session page opens its newest task (a fork that ran nothing yet: its own page).
                  onclick: () => go(`#/sessions/${w.id}`),
                },
                w.name,
              ),
              h('div', { class: 'mono small muted' }, w.session_id),
            ),
            h(
              'td',
              null,
              h(
                'span',
                {
                  class: statusClass(w.status === 'running' ? 'running' : w.status === 'failed' ? 'failed' : 'queued'),
                },
                w.status,
              ),
            ),
            h('td', { class: 'num' }, age(w.last_active_at)),
          ),
        ),
      )
      if (!workspaces.length)
        body.append(
          h(
            'tr',
            null,
            h('td', { colspan: 3, class: 'empty' }, 'No sessions. Submit a task in session mode to start one.'),
          ),
        )
    } catch (err) {
      status.textContent = describeError(err)
    }
  })()
  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Sessions')),
    status,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        null,
        h('caption', { class: 'sr-only' }, 'Sessions'),
        h(
          'thead',
          null,
          h('tr', null, ...['Session', 'Status', 'Last active'].map((c) => h('th', { scope: 'col' }, c))),
        ),
        body,
      ),
    ),
  )
  return { el, title: 'Sessions' }
}
