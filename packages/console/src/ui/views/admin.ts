import { api, ApiError, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { age } from '../format.js'
import type { View } from './view.js'

interface PoolStats {
  min: number
  max: number
  in_use: number
  idle: number
}
interface Container {
  id: string
  engine_id: string
  state: string
  owner_id: string | null
  workspace_id: string | null
  purpose: string | null
  created_at: string
  claimed_at: string | null
}
interface User {
  id: string
  name: string
  role: string
  created_at: string
}
interface Key {
  id: string
  user_id: string
  name: string | null
  created_at: string
  last_used_at: string | null
  token?: string
}
interface Limits {
  rate: { rpm: number; burst: number; callers: { caller_id: string; remaining: number; reset_seconds: number }[] } | null
  concurrency: { limit: number; profiles: { profile_id: string; owner_id: string | null; running: number; workspace_ids: string[] }[] }
}

const REFRESH_MS = 10_000

function table(caption: string, head: string[], rows: HTMLTableRowElement[], empty: string): HTMLElement {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      null,
      h('caption', { class: 'sr-only' }, caption),
      h('thead', null, h('tr', null, ...head.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, ...(rows.length ? rows : [h('tr', null, h('td', { colspan: head.length, class: 'empty' }, empty))])),
    ),
  )
}

/** A token shown once, with a copy button. */
function issued(label: string, token: string): HTMLElement {
  const input = h('input', { readonly: true, value: token, class: 'mono', 'aria-label': label, spellcheck: 'false' })
  return h(
    'div',
    { class: 'issued', role: 'status' },
    h('strong', null, label),
    h('p', { class: 'small muted' }, 'Shown once: Berth keeps only its hash.'),
    h('div', { class: 'row' }, input, h('button', { type: 'button', onclick: () => void navigator.clipboard?.writeText(token).catch(() => input.select()) }, 'Copy')),
  )
}

/**
 * The operator's views: the engine's health and the warm pool (containers with owner and
 * age), users and their keys (create, issue, revoke, delete), and each caller's rate and
 * concurrency state. Uses the operator token from sign-in.
 *
 * @example
 * ```ts
 * adminView() // #/admin, with an operator token
 * ```
 */
export function adminView(): View {
  const healthEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'))
  const poolEl = h('div')
  const usersEl = h('div')
  const limitsEl = h('div')
  const notice = h('div', { 'aria-live': 'polite' })
  const keys = new Map<string, Key[]>()

  const loadHealth = async () => {
    try {
      const [health, pool, containers] = await Promise.all([
        api<{ ok: boolean; version: string; pool: PoolStats }>('/health'),
        api<PoolStats>('/v1/pool', { admin: true }),
        api<{ containers: Container[]; total: number }>('/v1/pool/containers?limit=100', { admin: true }),
      ])
      replace(
        healthEl,
        h(
          'dl',
          { class: 'stats' },
          ...(
            [
              ['Server', health.ok ? 'ok' : 'down'],
              ['Version', health.version],
              ['Containers on the engine', `${pool.in_use + pool.idle} of ${pool.max}`],
            ] as const
          ).map(([k, v]) => h('div', { class: 'stat' }, h('dt', null, k), h('dd', null, v))),
        ),
      )
      replace(
        poolEl,
        h(
          'dl',
          { class: 'stats' },
          ...(
            [
              ['Min', pool.min],
              ['Max', pool.max],
              ['In use', pool.in_use],
              ['Idle', pool.idle],
            ] as const
          ).map(([k, v]) => h('div', { class: 'stat' }, h('dt', null, k), h('dd', { class: 'num' }, String(v)))),
        ),
        table(
          'Managed containers',
          ['Container', 'State', 'Owner', 'Workspace', 'Purpose', 'Age'],
          containers.containers.map((c) =>
            h(
              'tr',
              null,
              h('td', { class: 'mono small' }, c.id, h('div', { class: 'muted' }, c.engine_id.slice(0, 12))),
              h('td', null, h('span', { class: `badge status-${c.state === 'idle' ? 'queued' : 'running'}` }, c.state)),
              h('td', { class: 'mono small' }, c.owner_id ?? '—'),
              h('td', { class: 'mono small' }, c.workspace_id ?? '—'),
              h('td', null, c.purpose ?? '—'),
              h('td', { class: 'num', title: c.created_at }, age(c.created_at)),
            ),
          ),
          'No containers.',
        ),
      )
    } catch (err) {
      replace(poolEl, h('p', { class: 'error-text' }, describeError(err)))
    }
  }

  const loadLimits = async () => {
    try {
      const l = await api<Limits>('/admin/limits', { admin: true })
      replace(
        limitsEl,
        h('h3', null, 'Rate limit'),
        l.rate
          ? h('p', { class: 'muted small' }, `${l.rate.burst} requests at once per caller, refilled at ${l.rate.rpm} per minute. Callers not listed have their whole bucket.`)
          : h('p', { class: 'muted small' }, 'This server runs a rate limiter without state to show.'),
        l.rate
          ? table(
              'Rate limit per caller',
              ['Caller', 'Requests left', 'Full again in'],
              l.rate.callers.map((c) =>
                h('tr', null, h('td', { class: 'mono small' }, c.caller_id), h('td', { class: 'num' }, `${c.remaining} / ${l.rate!.burst}`), h('td', { class: 'num' }, `${c.reset_seconds} s`)),
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
            h('tr', null, h('td', { class: 'mono small' }, p.owner_id ?? '—'), h('td', { class: 'mono small' }, p.profile_id), h('td', { class: 'num' }, `${p.running} / ${l.concurrency.limit}`)),
          ),
          'No workspace is running.',
        ),
      )
    } catch (err) {
      replace(limitsEl, h('p', { class: err instanceof ApiError && err.status === 404 ? 'muted' : 'error-text' }, describeError(err)))
    }
  }

  const loadUsers = async () => {
    try {
      const { users } = await api<{ users: User[] }>('/admin/users?limit=100', { admin: true })
      await Promise.all(
        users.map(async (u) => {
          try {
            keys.set(u.id, (await api<{ keys: Key[] }>(`/admin/users/${u.id}/keys?limit=100`, { admin: true })).keys)
          } catch {
            /* older servers have no key list: keep what this page issued */
          }
        }),
      )
      replace(
        usersEl,
        table(
          'Users',
          ['User', 'Role', 'Created', 'Keys', ''],
          users.map((u) =>
            h(
              'tr',
              { 'data-user': u.id },
              h('td', null, u.name, h('div', { class: 'mono small muted' }, u.id)),
              h('td', null, u.role),
              h('td', { class: 'num', title: u.created_at }, age(u.created_at)),
              h(
                'td',
                null,
                h(
                  'ul',
                  { class: 'keys' },
                  ...(keys.get(u.id) ?? []).map((k) =>
                    h(
                      'li',
                      null,
                      h('span', { class: 'mono small' }, k.id),
                      k.name ? ` ${k.name}` : '',
                      h('span', { class: 'muted small' }, ` · used ${k.last_used_at ? `${age(k.last_used_at)} ago` : 'never'}`),
                      ' ',
                      h('button', { type: 'button', class: 'link small danger-text', 'aria-label': `Revoke key ${k.id}`, onclick: () => revoke(k.id) }, 'Revoke'),
                    ),
                  ),
                ),
              ),
              h(
                'td',
                { class: 'row-actions' },
                h('button', { type: 'button', class: 'small', onclick: () => issue(u) }, 'Issue key'),
                h('button', { type: 'button', class: 'small danger', onclick: () => remove(u) }, 'Delete'),
              ),
            ),
          ),
          'No users yet.',
        ),
      )
    } catch (err) {
      replace(usersEl, h('p', { class: 'error-text' }, describeError(err)))
    }
  }

  const act = async (fn: () => Promise<HTMLElement | string>) => {
    try {
      const out = await fn()
      replace(notice, typeof out === 'string' ? h('p', { class: 'ok-text' }, out) : out)
    } catch (err) {
      replace(notice, h('p', { class: 'error-text', role: 'alert' }, describeError(err)))
    }
    await Promise.all([loadUsers(), loadLimits()])
  }
  const issue = (u: User) =>
    act(async () => {
      const k = await api<Key & { token: string }>(`/admin/users/${u.id}/keys`, { method: 'POST', json: {}, admin: true })
      return issued(`New key for ${u.name}`, k.token)
    })
  const revoke = (id: string) =>
    act(async () => {
      if (!confirm(`Revoke key ${id}? Callers using it get 401 at once.`)) return 'Nothing revoked.'
      await api(`/admin/keys/${id}`, { method: 'DELETE', admin: true })
      return `Revoked ${id}.`
    })
  const remove = (u: User) =>
    act(async () => {
      if (!confirm(`Delete ${u.name} and revoke all their keys?`)) return 'Nothing deleted.'
      await api(`/admin/users/${u.id}`, { method: 'DELETE', admin: true })
      return `Deleted ${u.name}.`
    })

  const name = h('input', { id: 'new-user', name: 'name', required: true, autocomplete: 'off' })
  const role = h('select', { id: 'new-role', name: 'role' }, h('option', { value: 'user' }, 'user'), h('option', { value: 'admin' }, 'admin'))
  const create = h(
    'form',
    { class: 'inline-form', 'aria-label': 'Create a user' },
    h('div', { class: 'field' }, h('label', { for: 'new-user' }, 'Name'), name),
    h('div', { class: 'field' }, h('label', { for: 'new-role' }, 'Role'), role),
    h('button', { type: 'submit', class: 'primary' }, 'Create user'),
  )
  create.addEventListener('submit', (e) => {
    e.preventDefault()
    void act(async () => {
      const r = await api<{ user: User; key: Key & { token: string } }>('/admin/users', { method: 'POST', json: { name: name.value.trim(), role: role.value }, admin: true })
      name.value = ''
      return issued(`Caller key for ${r.user.name}`, r.key.token)
    })
  })

  void loadHealth()
  void loadUsers()
  void loadLimits()
  const timer = setInterval(() => {
    if (document.visibilityState !== 'visible') return
    void loadHealth()
    void loadLimits()
  }, REFRESH_MS)

  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Operator')),
    h('section', { class: 'card', 'aria-labelledby': 'h-health' }, h('h2', { id: 'h-health' }, 'Engine and server'), healthEl),
    h('section', { class: 'card', 'aria-labelledby': 'h-pool' }, h('h2', { id: 'h-pool' }, 'Warm pool'), poolEl),
    h('section', { class: 'card', 'aria-labelledby': 'h-limits' }, h('h2', { id: 'h-limits' }, 'Rate and concurrency per caller'), limitsEl),
    h('section', { class: 'card', 'aria-labelledby': 'h-users' }, h('h2', { id: 'h-users' }, 'Users and keys'), create, notice, usersEl),
  )
  return { el, title: 'Operator', dispose: () => clearInterval(timer) }
}
