import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson, printTable } from '../context.js'

/** `berth sessions fork <workspace> [--at <task>]`: a new session with a copy of the files and conversation. */
export const forkCommand = defineCommand({
  meta: {
    name: 'fork',
    description:
      'Fork a session: a new workspace with a copy of its files and conversation (the original is untouched)',
  },
  args: {
    workspace: { type: 'positional', description: 'The workspace to fork (ws_…)', required: true },
    at: {
      type: 'string',
      description: 'Fork at this task (task_…): any finished task with a checkpoint (default: the latest finished one)',
      valueHint: 'task_…',
    },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const fork = await clientFor(args).workspaces.fork({
        params: { id: args.workspace },
        body: args.at ? { at_task_id: args.at } : {},
      })
      if (args.json) return printJson(fork)
      log.info(
        `workspace ${fork.id}, session ${fork.session_id} (continue it with berth sessions --session ${fork.session_id})`,
      )
    }),
})

/** `berth sessions rewind <workspace> --to <task>`: the session itself taken back to one of its finished tasks. */
export const rewindCommand = defineCommand({
  meta: {
    name: 'rewind',
    description:
      "Take a session back to one of its finished tasks: that task's files and conversation; later tasks are marked rewound",
  },
  args: {
    workspace: { type: 'positional', description: 'The workspace to rewind (ws_…)', required: true },
    to: {
      type: 'string',
      description: 'The finished task to go back to (task_…), one with a checkpoint (berth sessions checkpoints)',
      valueHint: 'task_…',
      required: true,
    },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const ws = await clientFor(args).workspaces.rewind({
        params: { id: args.workspace },
        body: { to_task_id: args.to },
      })
      if (args.json) return printJson(ws)
      log.success(
        `rewound ${ws.id} to ${args.to}: the next follow-up (berth sessions --session ${ws.session_id}) goes on from its files and conversation`,
      )
    }),
})

/** A byte count for people. */
function size(n: number): string {
  if (n < 1024) return `${n} B`
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`
  return `${(n / 1024 / 1024).toFixed(1)} MiB`
}

/** `berth sessions checkpoints <workspace>`: the tasks a session can be forked at or rewound to. */
export const checkpointsCommand = defineCommand({
  meta: {
    name: 'checkpoints',
    description: 'List the checkpoints of a session, oldest first: the tasks it can be forked at or rewound to',
  },
  args: {
    workspace: { type: 'positional', description: 'The workspace (ws_…)', required: true },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const list = await clientFor(args).workspaces.checkpoints({ params: { id: args.workspace } })
      if (args.json) return printJson(list)
      printTable([
        ['TASK', 'KEPT AT', 'FILES', 'SIZE', 'ADDED'],
        ...list.checkpoints.map((c) => [c.task_id, c.created_at, String(c.files), size(c.bytes), size(c.added_bytes)]),
      ])
      log.info(`${list.checkpoints.length} checkpoint${list.checkpoints.length === 1 ? '' : 's'}`)
    }),
})
