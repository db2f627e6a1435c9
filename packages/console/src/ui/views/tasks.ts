import { TASK_STATUSES, type Task } from '@berth/contract'
import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { age, promptTitle, statusClass, TERMINAL, usd } from '../format.js'
import { profiles } from '../profiles.js'
import { socket } from '../socket.js'
import type { View } from './view.js'

const PAGE = 25
const REFRESH_MS = 15_000

/**
 * The task list: status, mode, profile, cost, turns and age; filters; rows update live over
 * the WebSocket (every unfinished task on the page is subscribed) and new tasks appear on a
 * slow refresh (the rate limit is the caller's, shared with their own scripts).
 *
 * @example
 * ```ts
 * tasksView(new URLSearchParams('status=running')) // #/tasks?status=running
 * ```
 */
export function tasksView(query: URLSearchParams): View {
  const status = query.get('status') ?? ''
  const mode = query.get('mode') ?? ''
  const profile = query.get('profile') ?? ''
  const page = Math.max(1, Number(query.get('page')) || 1)
  const rows = new Map<string, { task: Task; row: HTMLTableRowElement; off?: () => void }>()
  const body = h('tbody')
  const summary = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…')
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' })
  let names = new Map<string, string>()

  const navigate = (changes: Record<string, string>) => {
    const q = new URLSearchParams({ status, mode, profile, page: String(page), ...changes })
    for (const [k, v] of [...q]) if (!v || (k === 'page' && v === '1')) q.delete(k)
    location.hash = `#/tasks${q.size ? `?${q}` : ''}`
  }
  const select = (id: string, label: string, value: string, options: [string, string][], key: string) =>
    h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      h(
        'select',
        { id, onchange: (e: Event) => navigate({ [key]: (e.target as HTMLSelectElement).value, page: '1' }) },
        ...options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)),
      ),
    )
  const profileSelect = select('f-profile', 'Profile', profile, [['', 'Any']], 'profile')
  const filters = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter tasks', onsubmit: (e: Event) => e.preventDefault() },
    select(
      'f-status',
      'Status',
      status,
      [['', 'Any'], ...TASK_STATUSES.map((s): [string, string] => [s, s])],
      'status',
    ),
    select(
      'f-mode',
      'Mode',
      mode,
      [
        ['', 'Any'],
        ['batch', 'batch'],
        ['session', 'session'],
      ],
      'mode',
    ),
    profileSelect,
  )

  const cells = (t: Task) => [
    h(
      'td',
      { class: 'col-task' },
      h('a', { href: `#/tasks/${t.task_id}` }, promptTitle(t.prompt) || t.task_id),
      h('div', { class: 'muted mono small' }, t.task_id),
    ),
    h(
      'td',
      null,
      h('span', { class: statusClass(t.status) }, t.status),
      t.error ? h('div', { class: 'small error-text' }, t.error.code) : null,
      // A task waiting for a person says so here, where the person is looking.
      t.pending_approvals > 0
        ? h('div', { class: 'small needs-decision' }, `needs a decision (${t.pending_approvals})`)
        : null,
    ),
    h('td', { 'data-label': 'Mode' }, t.mode),
    h('td', { 'data-label': 'Profile' }, names.get(t.profile_id) ?? t.profile_id),
    h('td', { class: 'num', 'data-label': 'Cost' }, usd(t.result?.cost_usd)),
    h('td', { class: 'num', 'data-label': 'Turns' }, t.result ? String(t.result.turns) : '—'),
    h('td', { class: 'num', 'data-label': 'Age', title: t.created_at }, age(t.created_at)),
  ]

  const upsert = (t: Task) => {
    const known = rows.get(t.task_id)
    if (known) {
      known.task = t
      replace(known.row, ...cells(t))
      if (TERMINAL.has(t.status)) known.off?.()
      return
    }
    const row = h('tr', { 'data-task': t.task_id }, ...cells(t))
    const entry: { task: Task; row: HTMLTableRowElement; off?: () => void } = { task: t, row }
    if (!TERMINAL.has(t.status)) entry.off = socket.subscribe(t.task_id)
    rows.set(t.task_id, entry)
  }

  const load = async () => {
    try {
      const q = new URLSearchParams({ page: String(page), limit: String(PAGE) })
      if (status) q.set('status', status)
      if (mode) q.set('mode', mode)
      const [list, ps] = await Promise.all([
        api<{ tasks: Task[]; total: number }>(`/v1/tasks?${q}`),
        profiles().catch(() => []),
      ])
      names = new Map(ps.map((p) => [p.id, p.name]))
      const sel = profileSelect.querySelector('select')!
      if (sel.options.length === 1)
        for (const p of ps) sel.append(h('option', { value: p.id, selected: p.id === profile }, p.name))
      const shown = list.tasks.filter((t) => !profile || t.profile_id === profile)
      const keep = new Set(shown.map((t) => t.task_id))
      for (const [id, r] of rows) {
        if (keep.has(id)) continue
        r.off?.()
        rows.delete(id)
      }
      for (const t of shown) upsert(t)
      replace(body, ...shown.map((t) => rows.get(t.task_id)!.row))
      if (shown.length === 0)
        body.append(
          h(
            'tr',
            null,
            h('td', { colspan: 7, class: 'empty' }, 'No tasks yet. ', h('a', { href: '#/new' }, 'Submit one'), '.'),
          ),
        )
      const pages = Math.max(1, Math.ceil(list.total / PAGE))
      summary.textContent = `${list.total} task${list.total === 1 ? '' : 's'}${profile ? ' (profile filter applies to this page)' : ''}`
      replace(
        pager,
        h(
          'button',
          { type: 'button', disabled: page <= 1, onclick: () => navigate({ page: String(page - 1) }) },
          '← Newer',
        ),
        h('span', null, `Page ${page} of ${pages}`),
        h(
          'button',
          { type: 'button', disabled: page >= pages, onclick: () => navigate({ page: String(page + 1) }) },
          'Older →',
        ),
      )
    } catch (err) {
      summary.textContent = `Could not load tasks: ${describeError(err)}`
    }
  }

  const offMsg = socket.listen((m) => {
    if (m.type !== 'task.status') return
    const r = rows.get(m.task_id)
    if (r && m.task) upsert(m.task as Task)
  })
  void load()
  const timer = setInterval(() => {
    if (document.visibilityState === 'visible') void load()
  }, REFRESH_MS)
  const tick = setInterval(() => {
    for (const r of rows.values()) {
      const cell = r.row.lastElementChild
      if (cell) cell.textContent = age(r.task.created_at)
    }
  }, 10_000)

  const el = h(
    'div',
    { class: 'page' },
    h(
      'div',
      { class: 'page-head' },
      h('h1', null, 'Tasks'),
      h('a', { class: 'button primary', href: '#/new' }, 'New task'),
    ),
    filters,
    summary,
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'tasks' },
        h('caption', { class: 'sr-only' }, 'Your tasks, newest first'),
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            ...['Task', 'Status', 'Mode', 'Profile', 'Cost', 'Turns', 'Age'].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        body,
      ),
    ),
    pager,
  )
  return {
    el,
    title: 'Tasks',
    dispose() {
      clearInterval(timer)
      clearInterval(tick)
      offMsg()
      for (const r of rows.values()) r.off?.()
    },
  }
}
