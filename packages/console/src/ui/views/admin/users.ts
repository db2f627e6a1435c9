import { api, describeError } from '../../api.js'
import { h, replace } from '../../dom.js'
import { age } from '../../format.js'
import { issued, table } from './parts.js'

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
/**
 * Users and their keys: create a user (its first key shown once), issue another key, revoke
 * a key, delete a user. `changed` runs after each action (the limits view refreshes).
 *
 * @example
 * ```ts
 * const users = usersSection(() => limits.load())
 * page.append(users.el)
 * await users.load()
 * ```
 */
export function usersSection(changed: () => Promise<void>): { el: HTMLElement; load(): Promise<void> } {
  const usersEl = h('div')
  const notice = h('div', { 'aria-live': 'polite' })
  const keys = new Map<string, Key[]>()

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
                      h(
                        'span',
                        { class: 'muted small' },
                        ` · used ${k.last_used_at ? `${age(k.last_used_at)} ago` : 'never'}`,
                      ),
                      ' ',
                      h(
                        'button',
                        {
                          type: 'button',
                          class: 'link small danger-text',
                          'aria-label': `Revoke key ${k.id}`,
                          onclick: () => revoke(k.id),
                        },
                        'Revoke',
                      ),
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
    await Promise.all([loadUsers(), changed()])
  }
  const issue = (u: User) =>
    act(async () => {
      const k = await api<Key & { token: string }>(`/admin/users/${u.id}/keys`, {
        method: 'POST',
        json: {},
        admin: true,
      })
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
  const role = h(
    'select',
    { id: 'new-role', name: 'role' },
    h('option', { value: 'user' }, 'user'),
    h('option', { value: 'admin' }, 'admin'),
  )
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
      const r = await api<{ user: User; key: Key & { token: string } }>('/admin/users', {
        method: 'POST',
        json: { name: name.value.trim(), role: role.value },
        admin: true,
      })
      name.value = ''
      return issued(`Caller key for ${r.user.name}`, r.key.token)
    })
  })

  return {
    el: h(
      'section',
      { class: 'card', 'aria-labelledby': 'h-users' },
      h('h2', { id: 'h-users' }, 'Users and keys'),
      create,
      notice,
      usersEl,
    ),
    load: loadUsers,
  }
}
