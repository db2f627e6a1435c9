/**
 * The signed-in credentials, kept in this tab's sessionStorage only: never in a URL, never
 * in localStorage, gone when the tab closes.
 */
const KEY = 'berth.console.key'
const OPERATOR = 'berth.console.operator'

export interface Credentials {
  /** The caller key (or the operator token, when signed in as the operator). */
  key: string
  /** The operator token, when given: unlocks the admin views. */
  operator: string | null
}

/**
 * The credentials of this tab, or `null` when signed out.
 *
 * @example
 * ```ts
 * credentials()?.key // 'berth_sk_…'
 * ```
 */
export function credentials(): Credentials | null {
  const key = sessionStorage.getItem(KEY)
  return key ? { key, operator: sessionStorage.getItem(OPERATOR) } : null
}

/**
 * Remember credentials for this tab.
 *
 * @example
 * ```ts
 * signIn({ key: 'berth_sk_…', operator: null })
 * ```
 */
export function signIn(c: Credentials): void {
  sessionStorage.setItem(KEY, c.key)
  if (c.operator) sessionStorage.setItem(OPERATOR, c.operator)
  else sessionStorage.removeItem(OPERATOR)
}

/**
 * Forget them.
 *
 * @example
 * ```ts
 * signOut()
 * ```
 */
export function signOut(): void {
  // Every console key of this tab (credentials, the last profile used).
  for (const k of Object.keys(sessionStorage)) if (k.startsWith('berth.console.')) sessionStorage.removeItem(k)
}
