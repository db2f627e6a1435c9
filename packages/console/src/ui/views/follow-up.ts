import { api, describeError } from '../api.js'
import { h } from '../dom.js'

/**
 * The follow-up box of a session: sends the prompt as a `session` task with the session's
 * id (Ctrl/Cmd+Enter or Send) and hands the new task's id to `submitted`.
 *
 * @example
 * ```ts
 * page.append(followUpForm({ profileId: 'prof_1', sessionId: 'sess_1', submitted: (id) => follow(id) }))
 * ```
 */
export function followUpForm(o: {
  profileId: string
  sessionId: string
  submitted(taskId: string): Promise<void>
}): HTMLFormElement {
  const prompt = h('textarea', {
    id: 'follow-up',
    name: 'prompt',
    rows: 3,
    required: true,
    placeholder: 'Ask a follow-up in this session…',
  })
  const send = h('button', { type: 'submit', class: 'primary' }, 'Send')
  const err = h('p', { class: 'form-error', role: 'alert' })
  const form = h(
    'form',
    { class: 'card follow-up', 'aria-label': 'Follow-up prompt' },
    h('label', { for: 'follow-up' }, 'Follow-up prompt'),
    prompt,
    err,
    send,
  )
  const submit = async () => {
    const text = prompt.value
    if (!text.trim()) return
    send.disabled = true
    err.textContent = ''
    try {
      const r = await api<{ task_id: string }>('/v1/tasks', {
        method: 'POST',
        json: { mode: 'session', profile_id: o.profileId, session_id: o.sessionId, prompt: text },
      })
      prompt.value = ''
      await o.submitted(r.task_id)
    } catch (e) {
      err.textContent = describeError(e)
    } finally {
      send.disabled = false
    }
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    void submit()
  })
  // Ctrl/Cmd+Enter sends, as in every chat box.
  prompt.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault()
      void submit()
    }
  })
  return form
}
