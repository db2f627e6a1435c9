import { api, describeError } from '../api.js'
import { h } from '../dom.js'
import { signIn } from '../session.js'
import { go, type View } from './view.js'

/**
 * Sign in with a caller key (checked against the API), optionally with the operator token
 * for the admin views. Both stay in this tab's sessionStorage.
 *
 * @example
 * ```ts
 * go('#/signin') // renders signInView()
 * ```
 */
export function signInView(): View {
  const key = h('input', {
    id: 'key',
    name: 'key',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: 'berth_sk_…',
  })
  const operator = h('input', {
    id: 'operator',
    name: 'operator',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
  })
  const error = h('p', { class: 'form-error', role: 'alert' })
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in')
  const form = h(
    'form',
    { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to Berth'),
    h(
      'p',
      { class: 'muted' },
      'Your key stays in this browser tab only (session storage) and is sent as a bearer header.',
    ),
    h('label', { for: 'key' }, 'Caller key'),
    key,
    h(
      'label',
      { for: 'operator' },
      'Operator token ',
      h('span', { class: 'muted' }, '(optional: unlocks the admin views)'),
    ),
    operator,
    error,
    submit,
  )
  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    error.textContent = ''
    const k = key.value.trim()
    const op = operator.value.trim()
    if (!k && !op) {
      error.textContent = 'Enter a caller key (or the operator token).'
      key.focus()
      return
    }
    submit.disabled = true
    try {
      // The operator token is an admin caller too, so it can sign in on its own.
      await api('/v1/tasks?limit=1', { token: k || op })
      if (op) await api('/admin/users?limit=1', { token: op })
      signIn({ key: k || op, operator: op || null })
      go('#/tasks')
    } catch (err) {
      error.textContent = `Sign-in failed: ${describeError(err)}`
    } finally {
      submit.disabled = false
    }
  })
  queueMicrotask(() => key.focus())
  return { el: h('div', { class: 'center' }, form), title: 'Sign in' }
}
