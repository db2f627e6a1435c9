import type { Task } from '@berth/contract'
import { api, ApiError, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { age, promptTitle, statusClass, TERMINAL, usd } from '../format.js'
import { profiles } from '../profiles.js'
import { SeqStream, type TranscriptEvent } from '../seq-stream.js'
import { socket } from '../socket.js'
import { TranscriptView } from '../transcript.js'
import { filesPanel } from './files.js'
import { backgroundPanel } from './background.js'
import { checkpointActions, forkButton } from './fork.js'
import { previewsPanel } from './previews.js'
import { followUpForm } from './follow-up.js'
import { messageBox } from './message-box.js'
import type { View } from './view.js'

/** Pages an event log forward from `after` to its end. */
async function readAll(path: string, after: number): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = []
  for (let from = after; ; ) {
    const { events } = await api<{ events: TranscriptEvent[] }>(`${path}?after=${from}&limit=100`)
    out.push(...events)
    if (events.length < 100) return out
    from = events[events.length - 1]!.seq
  }
}

/**
 * A task, live: its transcript streams in as the agent works (seq-checked: deduplicated,
 * ordered, gaps refetched from the log), with status, turns, cost and tokens as they grow,
 * cancel, and for sessions the whole conversation, follow-up prompts and the files. While
 * it runs: Approve and Deny on each permission request, Interrupt, and a message box.
 *
 * @example
 * ```ts
 * taskView('task_1') // #/tasks/task_1
 * ```
 */
export function taskView(taskId: string): View {
  const root = h('div', { class: 'page task-page' })
  const disposers: (() => void)[] = []
  let disposed = false
  void (async () => {
    let task: Task
    try {
      task = await api<Task>(`/v1/tasks/${encodeURIComponent(taskId)}`)
    } catch (err) {
      replace(
        root,
        h('h1', null, 'Task'),
        h(
          'p',
          { class: 'error-text', role: 'alert' },
          err instanceof ApiError && err.status === 404 ? `No task ${taskId}.` : describeError(err),
        ),
      )
      return
    }
    if (disposed) return
    render(task)
  })()
  replace(root, h('p', { class: 'muted' }, 'Loading task…'))

  function render(first: Task) {
    const tasks = new Map<string, Task>([[first.task_id, first]])
    let current = first
    let followUp: HTMLFormElement | null = null
    let wasDone = TERMINAL.has(first.status)
    let dropped = false
    const session = first.mode === 'session' && first.workspace_id !== null
    const source = session ? `/v1/workspaces/${first.workspace_id}/transcript` : `/v1/tasks/${first.task_id}/events`

    // Header: fixed slots, so nothing below moves as numbers change.
    const title = h('h1', { class: 'task-title' }, promptTitle(first.prompt) || first.task_id)
    const badge = h(
      'span',
      { class: statusClass(first.status), 'data-testid': 'task-status', 'aria-live': 'polite' },
      first.status,
    )
    const stat = (label: string) => {
      const dd = h('dd', { class: 'num' }, '—')
      return { dd, el: h('div', { class: 'stat' }, h('dt', null, label), dd) }
    }
    const turns = stat('Turns')
    const cost = stat('Cost')
    const tokens = stat('Tokens in / out')
    const elapsed = stat('Time')
    const profileName = h('span', null, first.profile_id)
    const errorLine = h('p', { class: 'error-line', role: 'status' })
    const cancel = h('button', { type: 'button', class: 'danger' }, 'Cancel task')
    const live = h('span', { class: 'live muted small', 'aria-live': 'polite' })
    const interrupt = h('button', { type: 'button', class: 'danger', disabled: true }, 'Interrupt')
    interrupt.addEventListener('click', async () => {
      interrupt.disabled = true
      try {
        update(await api<Task>(`/v1/tasks/${current.task_id}/interrupt`, { method: 'POST' }))
      } catch (err) {
        errorLine.textContent = `Interrupt failed: ${describeError(err)}`
        interrupt.disabled = current.status !== 'running'
      }
    })
    cancel.addEventListener('click', async () => {
      cancel.disabled = true
      try {
        update(await api<Task>(`/v1/tasks/${current.task_id}/cancel`, { method: 'POST' }))
      } catch (err) {
        errorLine.textContent = `Cancel failed: ${describeError(err)}`
        cancel.disabled = false
      }
    })
    void profiles()
      .then((ps) => (profileName.textContent = ps.find((p) => p.id === first.profile_id)?.name ?? first.profile_id))
      .catch(() => {})

    const header = h(
      'header',
      { class: 'card task-head' },
      h(
        'div',
        { class: 'task-head-top' },
        title,
        h('div', { class: 'task-actions' }, badge, interrupt, cancel, session ? forkButton(first.workspace_id!) : null),
      ),
      h(
        'p',
        { class: 'muted small meta' },
        h('span', { class: 'mono' }, first.task_id),
        ` · ${first.mode} · profile `,
        profileName,
        first.session_id ? h('span', null, ' · session ', h('span', { class: 'mono' }, first.session_id)) : null,
        ' · ',
        live,
      ),
      h('dl', { class: 'stats' }, turns.el, cost.el, tokens.el, elapsed.el),
      errorLine,
    )

    const transcriptEl = h('div', { class: 'transcript', 'aria-live': 'off', 'aria-label': 'Transcript' })
    // Decisions go over HTTP: a refusal (409 once decided, 404) is shown on the card itself.
    const view = new TranscriptView(
      transcriptEl,
      async (taskId, requestId, body) => {
        await api(`/v1/tasks/${encodeURIComponent(taskId)}/approvals/${encodeURIComponent(requestId)}`, {
          method: 'POST',
          json: body,
        })
      },
      // A rewind's event is the workspace's own: read from the log, with the agent it ended.
      session
        ? checkpointActions(first.workspace_id!, () => {
            void stream.sync()
            background?.refresh()
          })
        : undefined,
    )
    // A session's living agent and its background work, read again as its tasks move.
    const background = session ? backgroundPanel(first.workspace_id!) : null
    if (background) disposers.push(background.dispose)
    const messages = messageBox(() => current.task_id)
    messages.hidden = true
    const waiting = h('p', { class: 'muted small waiting' })
    const main = h(
      'section',
      { class: 'card transcript-card', 'aria-labelledby': 'transcript-title' },
      h('h2', { id: 'transcript-title' }, session ? 'Conversation' : 'Transcript'),
      transcriptEl,
      waiting,
    )

    const update = (t: Task) => {
      tasks.set(t.task_id, t)
      background?.busy([...tasks.values()].some((x) => !TERMINAL.has(x.status)))
      background?.refresh()
      if (t.task_id !== current.task_id) return
      current = t
      badge.textContent = t.status
      badge.className = statusClass(t.status)
      const done = TERMINAL.has(t.status)
      // The end of a stream leaves no gap to notice a dropped last event by: check the log.
      if (done && !wasDone) void stream.sync()
      wasDone = done
      cancel.disabled = done
      cancel.textContent = done ? (t.status === 'cancelled' ? 'Cancelled' : 'Finished') : 'Cancel task'
      // Interrupt and messages reach only an agent that is running.
      interrupt.disabled = t.status !== 'running'
      messages.hidden = t.status !== 'running'
      if (done) view.closeRequests(t.task_id)
      errorLine.textContent = t.error ? `${t.error.code}: ${t.error.error}` : ''
      const asks = t.pending_approvals
      waiting.textContent = done
        ? ''
        : asks > 0
          ? `Waiting for your decision (${asks} request${asks === 1 ? '' : 's'})…`
          : t.status === 'running'
            ? 'Working…'
            : `Waiting: ${t.status}…`
      if (t.result) {
        turns.dd.textContent = String(t.result.turns)
        cost.dd.textContent = usd(t.result.cost_usd)
        tokens.dd.textContent = `${t.result.input_tokens} / ${t.result.output_tokens}`
      }
    }

    // Live stats from the events themselves, until the task's result says the last word.
    const liveStats = () => {
      if (current.result) return
      const s = view.seen.get(current.task_id)
      if (!s) return
      turns.dd.textContent = String(s.turns)
      tokens.dd.textContent = `${s.input} / ${s.output}`
      if (s.result) cost.dd.textContent = usd(Number(s.result.cost_usd))
    }

    // Rendering is batched per frame: a fast stream costs one layout per frame, not per token.
    let queue: TranscriptEvent[] = []
    let frame = 0
    const flush = () => {
      frame = 0
      const batch = queue
      queue = []
      const pinned = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120
      view.add(batch)
      liveStats()
      transcriptEl.dataset.lastSeq = String(stream.last)
      // Follow the tail of a live task (when the reader is at the bottom); a finished one opens at its top.
      if (pinned && batch.length && !TERMINAL.has(current.status))
        window.scrollTo({ top: document.documentElement.scrollHeight })
    }
    const stream = new SeqStream({
      deliver: (events) => {
        queue.push(...events)
        frame ||= requestAnimationFrame(flush)
      },
      fetchAfter: (after) => readAll(source, after),
      onError: (err) => (live.textContent = `Refetch failed: ${describeError(err)}`),
    })

    const watch = (id: string) => disposers.push(socket.subscribe(id))
    disposers.push(
      socket.listen((m) => {
        if (m.type === 'task.event' && tasks.has(m.task_id)) {
          stream.push([m.event])
          if (m.event.type === 'background_task') background?.refresh()
        } else if (m.type === 'task.status' && tasks.has(m.task_id) && m.task) update(m.task as Task)
        else if (m.type === 'error' && m.task_id && tasks.has(m.task_id)) live.textContent = m.error
      }),
      socket.onState((up) => {
        live.textContent = up ? 'live' : 'reconnecting…'
        // Back after a drop: whatever went past meanwhile comes from the log.
        if (!up) dropped = true
        else if (dropped) {
          dropped = false
          void stream.sync()
        }
      }),
    )
    watch(first.task_id)
    void readAll(source, 0).then(
      (events) => stream.push(events),
      (err) => (live.textContent = `History failed: ${describeError(err)}`),
    )

    const side: HTMLElement[] = []
    if (first.session_id) {
      followUp = followUpForm({
        profileId: first.profile_id,
        sessionId: first.session_id,
        // The new prompt joins this page: same conversation, its task now the current one.
        submitted: async (taskId) => {
          const t = await api<Task>(`/v1/tasks/${taskId}`)
          tasks.set(t.task_id, t)
          current = t
          history.replaceState(null, '', `#/tasks/${t.task_id}`)
          title.textContent = promptTitle(t.prompt) || t.task_id
          for (const d of [turns, cost, tokens]) d.dd.textContent = '—'
          update(t)
          watch(t.task_id)
        },
      })
    }
    if (background) side.push(background.el)
    if (first.workspace_id && first.mode === 'session') side.push(filesPanel(first.workspace_id))
    if (first.workspace_id && first.mode === 'session') side.push(previewsPanel(first.workspace_id))

    // Time so far while it runs, how long it took once done.
    const time = () => {
      const t = current
      const from = t.started_at ?? t.created_at
      elapsed.dd.textContent = t.finished_at ? age(from, Date.parse(t.finished_at)) : age(from)
    }
    const tick = setInterval(time, 1000)
    disposers.push(
      () => clearInterval(tick),
      () => cancelAnimationFrame(frame),
    )
    time()
    replace(
      root,
      h('div', { class: 'task-main' }, header, main, messages, followUp),
      side.length ? h('aside', { class: 'task-side' }, ...side) : null,
    )
    root.classList.toggle('with-side', side.length > 0)
    update(first)
  }

  return {
    el: root,
    title: 'Task',
    dispose() {
      disposed = true
      for (const d of disposers) d()
    },
  }
}
