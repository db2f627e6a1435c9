import { defineCommand } from 'citty'
import { action, clientFor, commonArgs, log, printJson } from '../context.js'

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
