import type { Playbook } from '@berth/contract'
import { api, describeError } from '../api.js'
import { h, replace } from '../dom.js'
import { profiles, type ProfileSummary } from '../profiles.js'
import type { View } from './view.js'

/** The form's fields, filled from a playbook (or empty for a new one). */
function playbookForm(ps: ProfileSummary[], pb: Playbook | null, onSaved: () => void): HTMLFormElement {
  const key = pb?.id ?? 'new'
  const field = (id: string, label: string, input: HTMLElement, wide = false) =>
    h('div', { class: wide ? 'field wide' : 'field' }, h('label', { for: `${id}-${key}` }, label), input)
  const profile = h(
    'select',
    { id: `profile-${key}`, disabled: pb !== null },
    ...ps.map((p) => h('option', { value: p.id }, `${p.name} (${p.slug})`)),
  )
  if (pb) profile.value = pb.profile_id
  const name = h('input', { id: `name-${key}`, value: pb?.name ?? '', required: true })
  const prompt = h('textarea', { id: `prompt-${key}`, rows: 3, required: true })
  prompt.value = pb?.prompt ?? ''
  const trigger = h(
    'select',
    { id: `trigger-${key}` },
    ...['manual', 'webhook', 'schedule'].map((t) => h('option', { value: t }, t)),
  )
  trigger.value = pb?.trigger_type ?? 'schedule'
  const cron = h('input', {
    id: `cron-${key}`,
    value: pb?.schedule?.cron ?? '0 7 * * 1-5',
    spellcheck: 'false',
    placeholder: 'minute hour day month weekday',
  })
  const zone = h('input', {
    id: `zone-${key}`,
    value: pb?.schedule?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone,
    spellcheck: 'false',
  })
  const missed = h(
    'select',
    { id: `missed-${key}` },
    h('option', { value: 'skip' }, 'skip it'),
    h('option', { value: 'run_once' }, 'run once at start'),
  )
  missed.value = pb?.schedule?.missed ?? 'skip'
  const enabled = h('input', { id: `enabled-${key}`, type: 'checkbox', checked: pb?.enabled ?? true })
  const scheduleFields = h(
    'fieldset',
    { class: 'limits' },
    h('legend', null, 'Schedule'),
    field('cron', 'Cron expression', cron),
    field('zone', 'Time zone', zone),
    field('missed', 'A slot missed while Berth was down', missed),
  )
  const showSchedule = () => (scheduleFields.hidden = trigger.value !== 'schedule')
  trigger.addEventListener('change', showSchedule)
  showSchedule()
  const error = h('p', { class: 'form-error', role: 'alert' })
  const save = h('button', { type: 'submit', class: 'primary' }, pb ? 'Save' : 'Create playbook')
  const form = h(
    'form',
    { class: 'card submit-form', 'aria-label': pb ? `Playbook ${pb.name}` : 'New playbook' },
    field('profile', 'Profile', profile),
    field('name', 'Name', name),
    field('prompt', 'Prompt', prompt, true),
    field('trigger', 'Trigger', trigger),
    scheduleFields,
    h('label', { for: `enabled-${key}` }, enabled, ' Enabled (schedule and webhook)'),
    error,
    h('div', { class: 'actions' }, save),
  )
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    error.textContent = ''
    const body: Record<string, unknown> = {
      name: name.value,
      prompt: prompt.value,
      trigger_type: trigger.value,
      enabled: enabled.checked,
    }
    if (trigger.value === 'schedule') body.schedule = { cron: cron.value, timezone: zone.value, missed: missed.value }
    if (!pb) body.profile_id = profile.value
    save.disabled = true
    const call = pb
      ? api(`/v1/playbooks/${pb.id}`, { method: 'PATCH', json: body })
      : api('/v1/playbooks', { method: 'POST', json: body })
    call.then(onSaved, (err) => {
      error.textContent = `Not saved: ${describeError(err)}`
      save.disabled = false
    })
  })
  return form
}

/** One playbook: its schedule and next runs, Run now, Pause/Resume, and its form. */
function playbookCard(ps: ProfileSummary[], pb: Playbook, reload: () => void): HTMLElement {
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' })
  const act = (label: string, call: () => Promise<unknown>, done: string) =>
    h(
      'button',
      {
        type: 'button',
        onclick: () =>
          call().then(
            () => {
              status.textContent = done
              reload()
            },
            (err) => (status.textContent = describeError(err)),
          ),
      },
      label,
    )
  const toggle = pb.enabled ? 'Pause' : 'Resume'
  return h(
    'section',
    { class: 'card', 'aria-label': pb.name, 'data-playbook': pb.id },
    h('h2', null, pb.name, ' ', h('span', { class: 'muted small' }, pb.trigger_type, pb.enabled ? '' : ' · paused')),
    pb.schedule
      ? h(
          'p',
          { class: 'mono small' },
          `${pb.schedule.cron} in ${pb.schedule.timezone} (missed: ${pb.schedule.missed})`,
        )
      : null,
    pb.next_runs.length
      ? h(
          'div',
          null,
          h('h3', { class: 'small' }, 'Next runs'),
          h(
            'ul',
            { class: 'next-runs', 'aria-label': `Next runs of ${pb.name}` },
            ...pb.next_runs.map((t) => h('li', null, h('time', { datetime: t }, new Date(t).toLocaleString()))),
          ),
        )
      : null,
    pb.last_slot
      ? h('p', { class: 'small muted' }, `Last slot ${pb.last_slot.at}: ${pb.last_slot.run_id ?? 'skipped (missed)'}`)
      : null,
    h(
      'div',
      { class: 'actions' },
      act('Run now', () => api(`/v1/playbooks/${pb.id}/run`, { method: 'POST' }), 'Run started'),
      act(
        toggle,
        () => api(`/v1/playbooks/${pb.id}`, { method: 'PATCH', json: { enabled: !pb.enabled } }),
        pb.enabled ? 'Paused' : 'Resumed',
      ),
    ),
    status,
    h('details', null, h('summary', null, 'Edit'), playbookForm(ps, pb, reload)),
  )
}

/** Playbooks of every profile: create, edit the schedule, see next runs, pause and resume. *
 * @example
 * ```ts
 * playbooksView() // #/playbooks
 * ```
 */
export function playbooksView(): View {
  const list = h('div', { class: 'playbooks' })
  const status = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…')
  const creator = h('div')
  const load = async () => {
    try {
      const ps = await profiles()
      const all = (
        await Promise.all(ps.map((p) => api<{ playbooks: Playbook[] }>(`/v1/profiles/${p.id}/playbooks?limit=100`)))
      ).flatMap((r) => r.playbooks)
      status.textContent = `${all.length} playbook${all.length === 1 ? '' : 's'}`
      replace(list, ...all.map((pb) => playbookCard(ps, pb, () => void load())))
      replace(
        creator,
        ps.length
          ? h(
              'details',
              null,
              h('summary', null, 'New playbook'),
              playbookForm(ps, null, () => void load()),
            )
          : h('p', { class: 'muted' }, 'Create a profile first.'),
      )
    } catch (err) {
      status.textContent = describeError(err)
    }
  }
  void load()
  const el = h(
    'div',
    { class: 'page' },
    h('div', { class: 'page-head' }, h('h1', null, 'Playbooks')),
    status,
    creator,
    list,
  )
  return { el, title: 'Playbooks' }
}
