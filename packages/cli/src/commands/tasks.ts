import { TASK_STATUSES, type TaskStatus } from '@berth/contract'
import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, EXIT, log, oneLine, printJson, printTable } from '../context.js'

const ls = defineCommand({
  meta: { name: 'ls', description: 'List your tasks, newest first' },
  args: {
    status: { type: 'enum', options: [...TASK_STATUSES], description: 'Only tasks in this status' },
    limit: { type: 'string', description: 'How many (default 20)', valueHint: 'n' },
    page: { type: 'string', description: 'Page number (default 1)', valueHint: 'n' },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const { tasks, total } = await clientFor(args).tasks.list({
        query: {
          limit: Number(args.limit ?? 20),
          page: Number(args.page ?? 1),
          status: (args.status || undefined) as TaskStatus | undefined,
        },
      })
      if (args.json) return printJson({ tasks, total })
      printTable([
        ['TASK', 'STATUS', 'MODE', 'CREATED', 'PROMPT'],
        ...tasks.map((t) => [t.task_id, t.status, t.mode, t.created_at, oneLine(t.prompt, 50)]),
      ])
      log.info(`${tasks.length} of ${total}`)
    }),
})

const get = defineCommand({
  meta: { name: 'get', description: 'Show one task: status, result or error' },
  args: { id: { type: 'positional', description: 'Task id (task_…)', required: true }, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const task = await clientFor(args).tasks.get({ params: { id: args.id } })
      if (args.json) printJson(task)
      else {
        printTable([
          ['task', task.task_id],
          ['status', task.status],
          ['mode', task.mode],
          ['profile', task.profile_id],
          ['session', task.session_id ?? '-'],
          ['workspace', task.workspace_id ?? '-'],
          ['created', task.created_at],
          ['finished', task.finished_at ?? '-'],
          ...(task.result
            ? [
                ['turns', String(task.result.turns)],
                ['tokens', `${task.result.input_tokens} in / ${task.result.output_tokens} out`],
                ['cost', `$${task.result.cost_usd.toFixed(4)}`],
                ['tools', task.result.tool_calls.map((c) => c.name).join(', ') || '-'],
              ]
            : []),
          ...(task.error ? [['error', `${task.error.code}: ${task.error.error}`]] : []),
        ])
        if (task.result?.text) process.stdout.write(`\n${task.result.text}\n`)
      }
      return task.status === 'failed' || task.status === 'cancelled' ? EXIT.taskFailed : EXIT.ok
    }),
})

const cancel = defineCommand({
  meta: { name: 'cancel', description: 'Cancel a task (a finished one is left as it is)' },
  args: { id: { type: 'positional', description: 'Task id (task_…)', required: true }, ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const task = await clientFor(args).tasks.cancel({ params: { id: args.id } })
      if (args.json) printJson(task)
      else log.success(`${task.task_id} is ${task.status}`)
    }),
})

/** `berth tasks ls|get|cancel`. */
export const tasksCommand = defineCommand({
  meta: { name: 'tasks', description: 'List, show and cancel tasks' },
  subCommands: { ls, get, cancel },
})
