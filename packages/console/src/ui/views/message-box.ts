import { api, describeError } from '../api.js'
import { h } from '../dom.js'

/**
 * The message box of a running task: the text goes to the agent at its next turn boundary
 * (`POST /v1/tasks/:id/messages`) and shows in the transcript when it takes it.
 * Ctrl/Cmd+Enter or Send; `taskId()` is asked at each send (a session's current task).
 *
 * @example
 * ```ts
 * page.append(messageBox(() => current.task_id))
 * ```
 */
export function messageBox(taskId: () => string): HTMLFormElement {
  const text = h('textarea', {
    id: 'task-message',
    name: 'text',
    rows: 2,
    required: true,
    placeholder: 'Add a correction or a hint while the agent works…',
  })
  const send = h('button', { type: 'submit', class: 'primary' }, 'Send message')
  const note = h('p', { class: 'form-error', role: 'alert' })
  const sent = h('p', { class: 'muted small', role: 'status' })
  const form = h(
    'form',
    { class: 'card follow-up message-box', 'aria-label': 'Message the agent' },
    h('label', { for: 'task-message' }, 'Message the agent'),
    text,
    note,
    sent,
    send,
  )
  const submit = async () => {
    const value = text.value
    if (!value.trim()) return
    send.disabled = true
    note.textContent = ''
    sent.textContent = ''
    try {
      await api(`/v1/tasks/${encodeURIComponent(taskId())}/messages`, { method: 'POST', json: { text: value } })
      text.value = ''
      sent.textContent = 'Sent: the agent takes it at its next turn.'
    } catch (e) {
      note.textContent = describeError(e)
    } finally {
      send.disabled = false
    }
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    void submit()
  })
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
      e.preventDefault()
      void submit()
    }
  })
  return form
}
