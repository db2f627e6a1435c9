import type { LivingAgent, Workspace } from '@berth/contract'
import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { age } from '../format.js'

/** How often the workspace is read again: its agent's background work changes between tasks too, with no event. */
const POLL_MS = 5000

export interface BackgroundPanel {
  el: HTMLElement
  /** Read the workspace again now (a task of the session moved, or its agent wrote an event). */
  refresh(): void
  /** Whether a task of the session is queued or running: Stop waits for it. */
  busy(busy: boolean): void
  dispose(): void
}

const when = (iso: string) => h('time', { datetime: iso, title: new Date(iso).toLocaleString() }, age(iso))

/**
 * The Background panel of a session: its living agent (since when, tasks served) and what
 * that runs in the background (kind, what, for how long), read again every few seconds and
 * whenever the page says the session moved; Stop (after a confirmation) ends the agent and
 * all it runs and releases the container, the files and the conversation kept.
 *
 * @example
 * ```ts
 * const bg = backgroundPanel('ws_1')
 * aside.append(bg.el)
 * ```
 */
export function backgroundPanel(workspaceId: string): BackgroundPanel {
  const path = `/v1/workspaces/${encodeURIComponent(workspaceId)}`
  const agentLine = h('p', { class: 'agent-line' }, 'Loading…')
  const list = h('ul', { class: 'bg-list', 'aria-label': 'Background processes' })
  const status = h('p', { class: 'muted small', role: 'status', 'aria-live': 'polite' })
  const error = h('p', { class: 'form-error small', role: 'alert' })
  const stop = h(
    'button',
    { type: 'button', class: 'danger small', disabled: true, 'aria-describedby': 'bg-stop-hint' },
    'Stop session',
  )
  const hint = h('p', { id: 'bg-stop-hint', class: 'muted small' })
  let ws: Workspace | null = null
  let running = false
  let stopping = false
  let loading: Promise<void> | null = null

  const render = () => {
    const agent: LivingAgent | null = ws?.agent ?? null
    if (!agent) {
      replace(agentLine, 'No agent running: the next follow-up starts one and resumes the conversation.')
      replace(list)
    } else {
      replace(
        agentLine,
        'Agent running for ',
        when(agent.since),
        ` · ${agent.tasks} task${agent.tasks === 1 ? '' : 's'} served`,
      )
      replace(
        list,
        ...agent.background.map((b) =>
          h(
            'li',
            { 'data-background': b.id },
            h('code', { class: 'bg-what' }, b.description),
            h('span', { class: 'muted small' }, ` ${b.kind} · for `, when(b.since)),
          ),
        ),
      )
      if (!agent.background.length) list.append(h('li', { class: 'muted small' }, 'Nothing runs in the background.'))
    }
    const warm = ws?.status === 'running' || agent !== null
    stop.disabled = stopping || running || !warm
    hint.textContent = running
      ? 'A task is running: Stop waits until it has finished.'
      : warm
        ? 'Ends the agent and everything it runs; the files and the conversation are kept.'
        : 'Nothing to stop: no container is warm.'
  }

  // One read at a time; a refresh asked for meanwhile reads once more after it.
  let again = false
  let readFailed = false
  const load = (): void => {
    if (loading) {
      again = true
      return
    }
    loading = api<Workspace>(path)
      .then(
        (w) => {
          ws = w
          render()
          if (readFailed) status.textContent = ''
          readFailed = false
        },
        (err) => {
          readFailed = true
          status.textContent = `Could not read the session: ${describeError(err)}`
        },
      )
      .finally(() => {
        loading = null
        if (again) {
          again = false
          load()
        }
      })
  }

  stop.addEventListener('click', async () => {
    if (!confirm('Stop this session? Its agent and everything it runs in the background end now.')) return
    stopping = true
    error.textContent = ''
    render()
    try {
      ws = await api<Workspace>(`${path}/stop`, { method: 'POST' })
      status.textContent = 'Stopped: no agent runs; the next follow-up resumes the conversation.'
    } catch (err) {
      error.textContent = `Stop failed: ${describeError(err)}`
    } finally {
      stopping = false
      render()
    }
  })

  // Ages tick every second; the workspace is read again every few.
  let n = 0
  const tick = setInterval(() => {
    if (++n % (POLL_MS / 1000) === 0 && !document.hidden) load()
    else render()
  }, 1000)
  load()

  const el = h(
    'section',
    { class: 'card background', 'aria-labelledby': 'background-title' },
    h('div', { class: 'panel-head' }, h('h2', { id: 'background-title' }, 'Background'), stop),
    agentLine,
    list,
    hint,
    error,
    status,
  )
  return {
    el,
    refresh: load,
    busy(b) {
      running = b
      render()
    },
    dispose: () => clearInterval(tick),
  }
}
