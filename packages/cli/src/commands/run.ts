import { defineCommand } from 'citty'
import { approvalArgs, approvalFields, createApprover } from '../approvals.js'
import { action, clientFor, commonArgs, EXIT, log, printJson } from '../context.js'
import { createTaskView } from '../render.js'
import { taskArgs, taskFields } from '../task-flags.js'

/**
 * `berth run --profile <slug|id> "prompt"`: run one task and stream it; each permission
 * request is asked at the terminal (or decided by `--approve-all` / `--deny-all`).
 */
export const runCommand = defineCommand({
  meta: { name: 'run', description: 'Run an agent task and stream its text, tool calls and cost' },
  args: {
    prompt: { type: 'positional', description: 'What the agent should do', required: true },
    ...taskArgs,
    ...approvalArgs,
    session: {
      type: 'string',
      description: 'Continue this session (sess_…) instead of a fresh workspace',
      valueHint: 'sess_…',
    },
    ...commonArgs,
  },
  run: ({ args }) =>
    action(async () => {
      const berth = clientFor(args)
      const body = {
        ...(await taskFields(berth, args)),
        ...approvalFields(args),
        prompt: args.prompt,
        ...(args.session ? { mode: 'session' as const, session_id: args.session } : { mode: 'batch' as const }),
      }
      const controller = new AbortController()
      const onSigint = () => controller.abort()
      process.once('SIGINT', onSigint)
      const view = args.json ? undefined : createTaskView()
      const approve = createApprover(args, {
        before: () => view?.pause(),
        after: () => view?.resume(),
        interrupt: onSigint,
      })
      try {
        const task = await berth.tasks.run(body, {
          signal: controller.signal,
          onEvent: view?.onEvent,
          onPermissionRequest: approve,
          onDecisionError: (err) => log.warn(`  the decision was not taken: ${(err as Error).message}`),
        })
        if (args.json) printJson(task)
        const ok = view ? view.finish(task) : task.status === 'completed'
        // The answer a program reads: the value `--output-schema` asked for, as JSON on stdout.
        if (!args.json && task.result?.structured_output !== undefined) printJson(task.result.structured_output)
        return ok ? EXIT.ok : EXIT.taskFailed
      } catch (err) {
        view?.stop()
        if (controller.signal.aborted) return EXIT.interrupted
        throw err
      } finally {
        process.off('SIGINT', onSigint)
      }
    }),
})
