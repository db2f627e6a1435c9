import { createInterface } from 'node:readline'
import { defineCommand } from 'citty'
import { approvalArgs, approvalFields, createApprover } from '../approvals.js'
import { action, clientFor, commonArgs, EXIT, log, printJson, printTable } from '../context.js'
import { createTaskView } from '../render.js'
import { showCommand, stopCommand } from './session-agent.js'
import { checkpointsCommand, forkCommand, rewindCommand } from './session-fork.js'
import { taskArgs, taskFields } from '../task-flags.js'

const start = defineCommand({
  meta: {
    name: 'start',
    description: 'Talk to an agent: each line you type is a follow-up in the same session (Ctrl-D ends)',
  },
  args: {
    ...taskArgs,
    ...approvalArgs,
    session: {
      type: 'string',
      description: 'Continue this session (sess_…) instead of starting one',
      valueHint: 'sess_…',
    },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const berth = clientFor(args)
      const session = berth.sessions.start({
        ...(await taskFields(berth, args)),
        ...approvalFields(args),
        session_id: args.session || undefined,
      })
      const rl = createInterface({
        input: process.stdin,
        output: process.stderr,
        terminal: Boolean(process.stdin.isTTY),
      })
      let current: AbortController | undefined
      let status: number = EXIT.ok
      // Ctrl-C cancels the prompt that is running; at the prompt it ends the session.
      rl.on('SIGINT', () => (current ? current.abort() : rl.close()))
      const tty = Boolean(process.stdin.isTTY)
      if (tty) log.info('Type a prompt; each line is a follow-up in the same session. Ctrl-D ends.')
      rl.setPrompt('› ')
      if (tty) rl.prompt()
      for await (const line of rl) {
        const prompt = line.trim()
        if (prompt) {
          current = new AbortController()
          const view = args.json ? undefined : createTaskView()
          const controller = current
          // Asked on this readline: while a prompt runs, the next line typed is the answer.
          const approve = createApprover(args, {
            before: () => view?.pause(),
            after: () => view?.resume(),
            interrupt: () => controller.abort(),
            // Withdrawn when the prompt is cancelled, so the next line is a prompt again.
            question: (q) => new Promise((resolve) => rl.question(q, { signal: controller.signal }, resolve)),
          })
          try {
            const task = await session.send(prompt, {
              signal: current.signal,
              onEvent: view?.onEvent,
              onPermissionRequest: approve,
            })
            if (args.json) printJson(task)
            const ok = view ? view.finish(task) : task.status === 'completed'
            if (!args.json && task.result?.structured_output !== undefined) printJson(task.result.structured_output)
            if (!ok) status = EXIT.taskFailed
            if (session.tasks.length === 1 && !args.json)
              log.info(`session ${session.id} (continue it with --session ${session.id})`)
          } catch (err) {
            view?.stop()
            if (!current.signal.aborted) throw err
            log.warn('cancelled')
          } finally {
            current = undefined
          }
        }
        if (tty) rl.prompt()
      }
      await session.close()
      return status
    }),
})

const ls = defineCommand({
  meta: { name: 'ls', description: 'List your sessions (workspaces)' },
  args: { ...commonArgs },
  run: ({ args }) =>
    action(async () => {
      const { workspaces, total } = await clientFor(args).workspaces.list({ query: { limit: 100 } })
      if (args.json) return printJson({ workspaces, total })
      printTable([
        ['SESSION', 'WORKSPACE', 'STATUS', 'PROFILE', 'LAST ACTIVE', 'NAME'],
        ...workspaces.map((w) => [w.session_id, w.id, w.status, w.profile_id ?? '-', w.last_active_at, w.name]),
      ])
      log.info(`${workspaces.length} of ${total}`)
    }),
})

/**
 * `berth sessions [start] --profile <slug|id>` (interactive), `berth sessions ls`, and for one
 * session's workspace `show`, `stop`, `fork`, `rewind` and `checkpoints`.
 */
export const sessionsCommand = defineCommand({
  meta: {
    name: 'sessions',
    description: 'Interactive sessions with follow-up prompts; list, show, stop, fork and rewind sessions',
  },
  // The flags of `start`, so `berth sessions --profile x` finds its subcommand.
  args: {
    ...taskArgs,
    ...approvalArgs,
    profile: { ...taskArgs.profile, required: false },
    session: { type: 'string' },
    ...commonArgs,
  },
  default: 'start',
  subCommands: {
    start,
    ls,
    show: showCommand,
    stop: stopCommand,
    fork: forkCommand,
    rewind: rewindCommand,
    checkpoints: checkpointsCommand,
  },
})
