import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, oneLine, printJson, printTable } from '../context.js'

const taskArg = { type: 'positional', description: 'Task id (task_…)', required: true } as const
const requestArg = { type: 'positional', description: 'Permission request id (apr_…)', required: true } as const
const messageArg = {
  type: 'string',
  alias: 'm',
  description: 'Why (the agent is told this on a denial)',
  valueHint: 'text',
} as const

/** `berth interrupt <task>`: stop the current turn now. */
export const interruptCommand = defineCommand({
  meta: { name: 'interrupt', description: 'Stop a task’s current turn now, mid-tool included (ends it cancelled)' },
  args: { task: taskArg, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const task = await clientFor(args).tasks.interrupt(args.task)
      if (args.json) return printJson(task)
      log.success(`${task.task_id} is ${task.status}${task.error ? ` (${task.error.code})` : ''}`)
    }),
})

/** `berth send <task> <text>`: a message for the running agent. */
export const sendCommand = defineCommand({
  meta: { name: 'send', description: 'Hand a running task’s agent a message at its next turn' },
  args: { task: taskArg, text: { type: 'positional', description: 'The message', required: true }, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const accepted = await clientFor(args).tasks.send(args.task, args.text)
      if (args.json) return printJson(accepted)
      log.success(`sent to ${accepted.task_id}; the agent takes it at its next turn`)
    }),
})

/** `berth approvals <task>`: the requests waiting for a decision. */
export const approvalsCommand = defineCommand({
  meta: { name: 'approvals', description: 'List a task’s permission requests waiting for a decision' },
  args: { task: taskArg, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const approvals = await clientFor(args).tasks.approvals(args.task)
      if (args.json) return printJson({ approvals })
      if (approvals.length === 0) return log.info(`no request of ${args.task} is waiting`)
      printTable([
        ['REQUEST', 'TOOL', 'EXPIRES', 'INPUT'],
        ...approvals.map((a) => [a.request_id, a.tool, a.expires_at, oneLine(JSON.stringify(a.input) ?? '', 80)]),
      ])
    }),
})

const decide = (decision: 'allow' | 'deny') =>
  defineCommand({
    meta: {
      name: decision === 'allow' ? 'approve' : 'deny',
      description:
        decision === 'allow'
          ? 'Allow a permission request: the tool runs'
          : 'Deny a permission request: the tool does not run, the agent is told why',
    },
    args: { task: taskArg, request: requestArg, message: messageArg, ...commonArgs },
    run: ({ args }) =>
      action(async () => {
        const berth = clientFor(args)
        const options = args.message ? { message: args.message } : {}
        const approval =
          decision === 'allow'
            ? await berth.tasks.approve(args.task, args.request, options)
            : await berth.tasks.deny(args.task, args.request, options)
        if (args.json) printJson(approval)
        else log.success(`${approval.request_id} (${approval.tool}) ${approval.status}`)
      }),
  })

/** `berth approve <task> <request>`. */
export const approveCommand = decide('allow')
/** `berth deny <task> <request>`. */
export const denyCommand = decide('deny')
