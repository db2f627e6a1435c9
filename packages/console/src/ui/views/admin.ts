import { h } from '../dom.js'
import { limitsSection } from './admin/limits.js'
import { poolSections } from './admin/pool.js'
import { usersSection } from './admin/users.js'
import type { View } from './view.js'

const REFRESH_MS = 10_000

/**
 * The operator's views: the engine's health and the warm pool (containers with owner and
 * age), each caller's rate and concurrency state, users and their keys (create, issue,
 * revoke, delete). Uses the operator token from sign-in; refreshes while visible.
 *
 * @example
 * ```ts
 * adminView() // #/admin, with an operator token
 * ```
 */
export function adminView(): View {
  const pool = poolSections()
  const limits = limitsSection()
  const users = usersSection(() => limits.load())
  void pool.load()
  void limits.load()
  void users.load()
  const timer = setInterval(() => {
    if (document.visibilityState !== 'visible') return
    void pool.load()
    void limits.load()
  }, REFRESH_MS)
  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Operator')),
    pool.health,
    pool.pool,
    limits.el,
    users.el,
  )
  return { el, title: 'Operator', dispose: () => clearInterval(timer) }
}
