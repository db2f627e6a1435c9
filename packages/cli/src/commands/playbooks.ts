import type { MissedRunPolicy, Playbook, PlaybookTrigger, UpdatePlaybook } from '@berth/contract'
import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, oneLine, printJson, printTable } from '../context.js'
import { profileId } from '../task-flags.js'

const id = { type: 'positional', description: 'Playbook id', valueHint: 'pb_…', required: true } as const

/** The flags that set a playbook's schedule and whether it is enabled. */
const scheduleArgs = {
  cron: {
    type: 'string',
    description: 'Run on this cron expression (5 fields, or 6 with seconds); sets --trigger schedule',
    valueHint: 'expr',
  },
  timezone: { type: 'string', description: 'IANA time zone of --cron (default UTC)', valueHint: 'zone' },
  missed: {
    type: 'string',
    description: 'A slot missed while no server ran: skip (default) or run_once at start',
    valueHint: 'skip|run_once',
  },
  disable: { type: 'boolean', description: 'Pause its schedule and webhook' },
  enable: { type: 'boolean', description: 'Resume its schedule and webhook' },
} as const

type ScheduleFlags = {
  cron?: string | undefined
  timezone?: string | undefined
  missed?: string | undefined
  disable?: boolean | undefined
  enable?: boolean | undefined
}

/** The body fields the schedule flags ask for (none when none is given). */
function scheduleBody(args: ScheduleFlags): Pick<UpdatePlaybook, 'trigger_type' | 'schedule' | 'enabled'> {
  const body: Pick<UpdatePlaybook, 'trigger_type' | 'schedule' | 'enabled'> = {}
  if (args.cron !== undefined)
    body.schedule = {
      cron: args.cron,
      ...(args.timezone !== undefined && { timezone: args.timezone }),
      ...(args.missed !== undefined && { missed: args.missed as MissedRunPolicy }),
    }
  else if (args.timezone !== undefined || args.missed !== undefined)
    throw new Error('--timezone and --missed go with --cron (give the whole schedule)')
  if (body.schedule) body.trigger_type = 'schedule'
  if (args.disable) body.enabled = false
  if (args.enable) body.enabled = true
  return body
}

/** The schedule in one cell: `cron (zone)` with its state. */
const scheduleCell = (p: Playbook) =>
  p.schedule ? `${p.schedule.cron} (${p.schedule.timezone})${p.enabled ? '' : ' paused'}` : p.enabled ? '-' : 'paused'

/** A playbook as lines of text, next runs included. */
function printPlaybook(p: Playbook): void {
  printTable([
    ['ID', p.id],
    ['NAME', p.name],
    ['TRIGGER', p.trigger_type],
    ['ENABLED', String(p.enabled)],
    ['SCHEDULE', p.schedule ? `${p.schedule.cron} in ${p.schedule.timezone}, missed: ${p.schedule.missed}` : '-'],
    ['NEXT RUNS', p.next_runs.join(', ') || '-'],
    ['LAST SLOT', p.last_slot ? `${p.last_slot.at} ${p.last_slot.run_id ?? '(skipped)'}` : '-'],
    ['PROMPT', oneLine(p.prompt)],
  ])
  if (p.webhook_secret) log.info(`Webhook secret (shown once): ${p.webhook_secret}`)
}

const ls = defineCommand({
  meta: { name: 'ls', description: "List a profile's playbooks" },
  args: { ...commonArgs, profile: { type: 'string', alias: 'p', description: 'Profile slug or id', required: true } },
  run: ({ args }) =>
    action(async () => {
      const berth = clientFor(args)
      const params = { id: await profileId(berth, args.profile) }
      const { playbooks, total } = await berth.profiles.playbooks({ params, query: { limit: 100 } })
      if (args.json) return printJson({ playbooks, total })
      printTable([
        ['ID', 'TRIGGER', 'SCHEDULE', 'NEXT RUN', 'NAME'],
        ...playbooks.map((p) => [p.id, p.trigger_type, scheduleCell(p), p.next_runs[0] ?? '-', p.name]),
      ])
      log.info(`${playbooks.length} of ${total}`)
    }),
})

const show = defineCommand({
  meta: { name: 'show', description: 'Show a playbook and its next run times' },
  args: { ...commonArgs, id },
  run: ({ args }) =>
    action(async () => {
      const p = await clientFor(args).playbooks.get({ params: { id: args.id } })
      return args.json ? printJson(p) : printPlaybook(p)
    }),
})

const create = defineCommand({
  meta: { name: 'create', description: 'Create a playbook (--cron makes it a scheduled one)' },
  args: {
    ...commonArgs,
    profile: { type: 'string', alias: 'p', description: 'Profile slug or id', required: true },
    name: { type: 'string', description: 'Its name', required: true },
    prompt: { type: 'string', description: 'The instructions each run starts with', required: true },
    trigger: { type: 'string', description: 'manual (default), webhook or schedule', valueHint: 'trigger' },
    ...scheduleArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const berth = clientFor(args)
      const p = await berth.playbooks.create({
        body: {
          profile_id: await profileId(berth, args.profile),
          name: args.name,
          prompt: args.prompt,
          ...(args.trigger && { trigger_type: args.trigger as PlaybookTrigger }),
          ...scheduleBody(args),
        },
      })
      return args.json ? printJson(p) : printPlaybook(p)
    }),
})

const update = defineCommand({
  meta: { name: 'update', description: 'Change a playbook: its schedule, trigger, prompt, or pause it' },
  args: {
    ...commonArgs,
    id,
    name: { type: 'string', description: 'A new name' },
    prompt: { type: 'string', description: 'New instructions' },
    trigger: { type: 'string', description: 'manual, webhook or schedule (leaving schedule clears it)' },
    ...scheduleArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const body: UpdatePlaybook = {
        ...(args.name && { name: args.name }),
        ...(args.prompt && { prompt: args.prompt }),
        ...(args.trigger && { trigger_type: args.trigger as PlaybookTrigger }),
        ...scheduleBody(args),
      }
      const p = await clientFor(args).playbooks.update({ params: { id: args.id }, body })
      return args.json ? printJson(p) : printPlaybook(p)
    }),
})

const runs = defineCommand({
  meta: { name: 'runs', description: "A playbook's runs, newest first" },
  args: { ...commonArgs, id },
  run: ({ args }) =>
    action(async () => {
      const { runs, total } = await clientFor(args).playbooks.runs({ params: { id: args.id }, query: { limit: 100 } })
      if (args.json) return printJson({ runs, total })
      printTable([
        ['ID', 'TRIGGER', 'SLOT', 'STATUS', 'TASK', 'ERROR'],
        ...runs.map((r) => [r.id, r.trigger, r.scheduled_for ?? '-', r.status, r.task_id ?? '-', r.error?.code ?? '']),
      ])
      log.info(`${runs.length} of ${total}`)
    }),
})

const run = defineCommand({
  meta: { name: 'run', description: 'Start a run now' },
  args: { ...commonArgs, id },
  run: ({ args }) =>
    action(async () => {
      const started = await clientFor(args).playbooks.run({ params: { id: args.id } })
      return args.json ? printJson(started) : log.success(`Run ${started.run_id} started`)
    }),
})

/** `berth playbooks ls|show|create|update|runs|run`. */
export const playbooksCommand = defineCommand({
  meta: { name: 'playbooks', description: 'Manage playbooks and their schedules' },
  subCommands: { ls, show, create, update, runs, run },
})
