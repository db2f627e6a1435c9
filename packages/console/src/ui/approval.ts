import { describeError } from './api.js'
import { h } from './dom.js'
import type { TranscriptEvent } from './seq-stream.js'

/** What a person decided: allow (with the input, when they changed it) or deny, and why. */
export interface DecisionBody {
  decision: 'allow' | 'deny'
  message?: string
  input?: Record<string, unknown>
}

/** Sends a decision (`POST /v1/tasks/:id/approvals/:request_id`); rejects with the API's error. */
export type Decide = (taskId: string, requestId: string, body: DecisionBody) => Promise<void>

/** One permission request on the page: its tool and input, then Approve/Deny, then its outcome. */
export interface ApprovalCard {
  el: HTMLElement
  /** The request was decided (a `permission_decision` event). */
  decided(e: TranscriptEvent): void
  /** The task ended with the request still open. */
  closed(): void
}

/**
 * The card of a `permission_request` event: the tool and its full input, an optional
 * message (told to the agent on a denial), and Approve and Deny while it waits; once
 * decided, the outcome in their place (who decided, and why).
 *
 * @example
 * ```ts
 * const card = approvalCard(event, decide)
 * transcript.append(card.el)
 * card.decided(decisionEvent)
 * ```
 */
export function approvalCard(e: TranscriptEvent, decide: Decide | undefined): ApprovalCard {
  const requestId = String(e.request_id)
  const tool = String(e.tool)
  const id = `msg-${requestId}`
  const message = h('input', {
    id,
    type: 'text',
    maxlength: 4000,
    placeholder: 'Optional: why (the agent is told on a denial)',
  })
  // The input may be changed before allowing (a safer command, a smaller amount).
  const original = JSON.stringify(e.input, null, 2) ?? ''
  const inputId = `input-${requestId}`
  const input = h('textarea', { id: inputId, class: 'mono', rows: Math.min(12, original.split('\n').length + 1) })
  input.value = original
  const editor = h(
    'details',
    { class: 'approval-edit' },
    h('summary', null, 'Edit the input before approving'),
    h('label', { for: inputId, class: 'small muted' }, 'Input (JSON)'),
    input,
  )
  const approve = h('button', { type: 'button', class: 'primary' }, 'Approve')
  const deny = h('button', { type: 'button', class: 'danger' }, 'Deny')
  const error = h('p', { class: 'form-error', role: 'alert' })
  const state = h('span', { class: 'badge status-running approval-state' }, 'waiting')
  const actions = h(
    'div',
    { class: 'approval-actions' },
    h('label', { for: id, class: 'small muted' }, 'Message'),
    message,
    editor,
    h('div', { class: 'approval-buttons' }, approve, deny),
    error,
  )
  const outcome = h('p', { class: 'approval-outcome', role: 'status' })
  const el = h(
    'section',
    {
      class: 'ev approval',
      'data-seq': e.seq,
      'data-request-id': requestId,
      'aria-label': `Permission request: ${tool}`,
    },
    h(
      'h3',
      { class: 'approval-head' },
      h('span', null, 'Permission request: '),
      h('span', { class: 'tool-name' }, tool),
      ' ',
      state,
    ),
    h('pre', { class: 'tool-input' }, original),
    decide ? actions : null,
    outcome,
  )
  let settled = false
  const settle = (label: string, cls: string, text: string) => {
    settled = true
    state.textContent = label
    state.className = `badge ${cls} approval-state`
    actions.remove()
    outcome.textContent = text
  }
  const send = async (decision: 'allow' | 'deny') => {
    if (!decide || settled) return
    const body: DecisionBody = { decision }
    if (message.value.trim()) body.message = message.value.trim()
    if (decision === 'allow' && input.value !== original) {
      try {
        const parsed: unknown = JSON.parse(input.value)
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('must be a JSON object')
        body.input = parsed as Record<string, unknown>
      } catch (err) {
        error.textContent = `The input is not valid: ${(err as Error).message}`
        return
      }
    }
    approve.disabled = deny.disabled = message.disabled = true
    error.textContent = ''
    try {
      await decide(String(e.task_id), requestId, body)
    } catch (err) {
      error.textContent = `Not decided: ${describeError(err)}`
      approve.disabled = deny.disabled = message.disabled = false
    }
  }
  approve.addEventListener('click', () => void send('allow'))
  deny.addEventListener('click', () => void send('deny'))
  return {
    el,
    decided(d) {
      const why = d.message ? `: ${String(d.message)}` : ''
      if (d.decision === 'allow') settle('allowed', 'status-completed', `Allowed${why}`)
      else if (d.by === 'timeout') settle('expired', 'status-cancelled', `Denied: no decision in time${why}`)
      else settle('denied', 'status-failed', `Denied${why}`)
    },
    closed() {
      if (!settled) settle('closed', 'status-cancelled', 'Not decided: the task ended first')
    },
  }
}
