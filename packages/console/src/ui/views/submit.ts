import { api, describeError } from '../api.js'
import { h } from '../dom.js'
import { profiles } from '../profiles.js'
import { go, type View } from './view.js'

/** Pick a profile, write a prompt, set limits, submit: and land on the live task page. *
 * @example
 * ```ts
 * submitView() // #/new
 * ```
 */
export function submitView(): View {
  const profile = h(
    'select',
    { id: 'profile', name: 'profile_id', required: true },
    h('option', { value: '' }, 'Loading profiles…'),
  )
  const prompt = h('textarea', {
    id: 'prompt',
    name: 'prompt',
    rows: 8,
    required: true,
    placeholder: 'What should the agent do?',
  })
  const modeBatch = h('input', { type: 'radio', name: 'mode', id: 'mode-batch', value: 'batch', checked: true })
  const modeSession = h('input', { type: 'radio', name: 'mode', id: 'mode-session', value: 'session' })
  const maxTurns = h('input', {
    id: 'max-turns',
    name: 'max_turns',
    type: 'number',
    min: 1,
    max: 1000,
    step: 1,
    inputmode: 'numeric',
  })
  const maxBudget = h('input', {
    id: 'max-budget',
    name: 'max_budget_usd',
    type: 'number',
    min: 0.0001,
    max: 10000,
    step: 'any',
    inputmode: 'decimal',
  })
  const priority = h(
    'select',
    { id: 'priority', name: 'priority' },
    ...['normal', 'high', 'low'].map((p) => h('option', { value: p }, p)),
  )
  const tools = h('input', {
    id: 'tools',
    name: 'allowed_tools',
    spellcheck: 'false',
    placeholder: "profile's defaults",
  })
  const error = h('p', { class: 'form-error', role: 'alert' })
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Submit task')

  void profiles(true).then(
    (ps) => {
      profile.replaceChildren(
        ...(ps.length
          ? ps.map((p) => h('option', { value: p.id }, `${p.name} (${p.slug})`))
          : [h('option', { value: '' }, 'No profiles: create one with POST /v1/profiles')]),
      )
      const remembered = sessionStorage.getItem('berth.console.profile')
      if (remembered && ps.some((p) => p.id === remembered)) profile.value = remembered
    },
    (err) => (error.textContent = `Could not load profiles: ${describeError(err)}`),
  )

  const form = h(
    'form',
    { class: 'card submit-form', 'aria-labelledby': 'submit-title' },
    h('h1', { id: 'submit-title' }, 'New task'),
    h('div', { class: 'field' }, h('label', { for: 'profile' }, 'Profile'), profile),
    h(
      'fieldset',
      { class: 'modes' },
      h('legend', null, 'Mode'),
      h(
        'label',
        { for: 'mode-batch' },
        modeBatch,
        ' Batch ',
        h('span', { class: 'muted small' }, '(fresh container, reaped after)'),
      ),
      h(
        'label',
        { for: 'mode-session' },
        modeSession,
        ' Session ',
        h('span', { class: 'muted small' }, '(warm container, follow-ups, files)'),
      ),
    ),
    h('div', { class: 'field' }, h('label', { for: 'prompt' }, 'Prompt'), prompt),
    h(
      'fieldset',
      { class: 'limits' },
      h('legend', null, 'Limits'),
      h('div', { class: 'field' }, h('label', { for: 'max-turns' }, 'Max turns'), maxTurns),
      h('div', { class: 'field' }, h('label', { for: 'max-budget' }, 'Max budget (USD)'), maxBudget),
      h('div', { class: 'field' }, h('label', { for: 'priority' }, 'Priority'), priority),
      h('div', { class: 'field wide' }, h('label', { for: 'tools' }, 'Allowed tools (comma-separated)'), tools),
    ),
    error,
    h('div', { class: 'actions' }, submit, h('span', { class: 'muted small' }, 'Ctrl+Enter submits')),
  )
  const send = async () => {
    error.textContent = ''
    if (!profile.value) {
      error.textContent = 'Choose a profile.'
      return
    }
    if (!prompt.value.trim()) {
      error.textContent = 'Write a prompt.'
      prompt.focus()
      return
    }
    const body: Record<string, unknown> = {
      mode: modeSession.checked ? 'session' : 'batch',
      profile_id: profile.value,
      prompt: prompt.value,
    }
    if (maxTurns.value) body.max_turns = Number(maxTurns.value)
    if (maxBudget.value) body.max_budget_usd = Number(maxBudget.value)
    if (priority.value !== 'normal') body.priority = priority.value
    const list = tools.value
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean)
    if (list.length) body.allowed_tools = list
    submit.disabled = true
    try {
      const r = await api<{ task_id: string }>('/v1/tasks', { method: 'POST', json: body })
      sessionStorage.setItem('berth.console.profile', profile.value)
      go(`#/tasks/${r.task_id}`)
    } catch (err) {
      error.textContent = `Not submitted: ${describeError(err)}`
      submit.disabled = false
    }
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    void send()
  })
  prompt.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault()
      void send()
    }
  })
  queueMicrotask(() => prompt.focus())
  return { el: h('div', { class: 'page narrow' }, form), title: 'New task' }
}
