import type { Workspace } from '@berth/contract'
import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import type { TranscriptEvent } from '../seq-stream.js'
import type { TaskActions } from '../transcript.js'
import { filesPanel } from './files.js'
import { followUpForm } from './follow-up.js'
import { go, type View } from './view.js'

/**
 * The Fork button of a session: forks its workspace (a copy of the files and the
 * conversation so far, or as they were at task `at`) and opens the new session; a refusal
 * (a task still running, a task without a checkpoint) shows beside it.
 *
 * @example
 * ```ts
 * header.append(forkButton('ws_1'))
 * ```
 */
export function forkButton(workspaceId: string, at?: { taskId: string; n: number }): HTMLElement {
  const button = h(
    'button',
    {
      type: 'button',
      class: at ? 'small' : null,
      title: at
        ? 'A new session with the files and conversation as this task left them'
        : 'A new session with a copy of the files and conversation',
      'aria-label': at ? `Fork here, at task ${at.n}` : null,
    },
    at ? 'Fork here' : 'Fork',
  )
  const note = h('span', { class: 'form-error small', role: 'alert' })
  button.addEventListener('click', async () => {
    button.disabled = true
    note.textContent = ''
    try {
      const fork = await api<Workspace>(`/v1/workspaces/${encodeURIComponent(workspaceId)}/fork`, {
        method: 'POST',
        json: at ? { at_task_id: at.taskId } : {},
      })
      go(`#/sessions/${fork.id}`)
    } catch (err) {
      note.textContent = `Fork failed: ${describeError(err)}`
    } finally {
      button.disabled = false
    }
  })
  return h('span', { class: 'fork' }, button, note)
}

/** Rewind here: the session itself back to task `at` (after a confirmation); `rewound` once it is. */
function rewindButton(workspaceId: string, at: { taskId: string; n: number }, rewound: () => void): HTMLElement {
  const button = h(
    'button',
    {
      type: 'button',
      class: 'small',
      title: 'Take this session back to the files and conversation this task left',
      'aria-label': `Rewind here, to task ${at.n}`,
    },
    'Rewind here',
  )
  const note = h('span', { class: 'form-error small', role: 'alert' })
  button.addEventListener('click', async () => {
    const question = `Rewind this session to task ${at.n}? Its files and conversation go back to how that task left them, the tasks after it are marked rewound, and its agent and what that runs in the background end.`
    if (!confirm(question)) return
    button.disabled = true
    note.textContent = ''
    try {
      await api<Workspace>(`/v1/workspaces/${encodeURIComponent(workspaceId)}/rewind`, {
        method: 'POST',
        json: { to_task_id: at.taskId },
      })
      rewound()
    } catch (err) {
      note.textContent = `Rewind failed: ${describeError(err)}`
    } finally {
      button.disabled = false
    }
  })
  return h('span', { class: 'rewind' }, button, note)
}

/**
 * What a finished task of a session offers under its result: Fork here (a new session at
 * that task) and Rewind here (this session back to it; `rewound` is called once it is).
 *
 * @example
 * ```ts
 * new TranscriptView(el, decide, checkpointActions('ws_1', () => stream.sync()))
 * ```
 */
export function checkpointActions(workspaceId: string, rewound: () => void): TaskActions {
  return (taskId, n) =>
    h(
      'div',
      { class: 'checkpoint-actions' },
      forkButton(workspaceId, { taskId, n }),
      rewindButton(workspaceId, { taskId, n }, rewound),
    )
}

/**
 * A session by its workspace: the page of its newest task, or, for a fork that has run
 * nothing yet, where it came from, its files and the box for its first prompt.
 *
 * @example
 * ```ts
 * sessionPage('ws_1') // #/sessions/ws_1
 * ```
 */
export function sessionPage(workspaceId: string): View {
  const root = h('div', { class: 'page' }, h('p', { class: 'muted' }, 'Loading session…'))
  void (async () => {
    try {
      const ws = await api<Workspace>(`/v1/workspaces/${encodeURIComponent(workspaceId)}`)
      const path = `/v1/workspaces/${ws.id}/transcript`
      const { total } = await api<{ total: number }>(`${path}?limit=1`)
      const { events } = await api<{ events: TranscriptEvent[] }>(`${path}?after=${Math.max(0, total - 1)}&limit=1`)
      const last = events[0]
      // A fork's transcript starts with the original's tasks: its own come after them.
      if (last && last.task_id !== ws.forked_from?.task_id) return go(`#/tasks/${last.task_id}`)
      if (!ws.forked_from || !ws.profile_id) throw new Error('This session has no transcript yet.')
      const from = ws.forked_from
      replace(
        root,
        h('h1', null, ws.name),
        h(
          'p',
          { class: 'muted' },
          'Forked from ',
          h('a', { href: `#/tasks/${from.task_id}` }, `session ${from.workspace_id} at task ${from.task_id}`),
          ` · session `,
          h('span', { class: 'mono' }, ws.session_id),
          '. It remembers that conversation; its first prompt goes on from there.',
        ),
        followUpForm({
          profileId: ws.profile_id,
          sessionId: ws.session_id,
          submitted: async (id) => go(`#/tasks/${id}`),
        }),
        filesPanel(ws.id),
      )
    } catch (err) {
      replace(root, h('h1', null, 'Session'), h('p', { class: 'error-text', role: 'alert' }, describeError(err)))
    }
  })()
  return { el: root, title: 'Session' }
}
