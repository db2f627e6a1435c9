import { SubmitTask, validationError, type ValidationIssue } from '@berth/contract'
import * as v from 'valibot'
import type { Caller } from '../caller.js'
import { toIssues } from '../internal/input.js'
import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'
import type { Services } from '../services.js'

/**
 * The one way a task is submitted, over HTTP (`POST /v1/tasks`, its body validated by the
 * pipeline against the route's `SubmitTask`) and over the WebSocket (`submit`, its `task`
 * read by {@link readSubmittedTask}): the same record, the same checks, the same answer.
 */
export function submitTask(services: Services, caller: Caller, input: SubmitTask) {
  return services.tasks.submit(caller.id, input)
}

/**
 * The `task` of a WebSocket `submit`, validated with the schema and the issue rules of
 * `POST /v1/tasks` (issues at location `body`), their paths under `task`. Throws a 400
 * VALIDATION_FAILED naming the first problem.
 */
export function readSubmittedTask(raw: unknown): SubmitTask {
  const parsed = v.safeParse(SubmitTask, raw)
  if (parsed.success) return parsed.output
  const issues: ValidationIssue[] = toIssues('body', parsed.issues).map((i) => ({
    ...i,
    path: i.path ? `task.${i.path}` : 'task',
  }))
  throw validationError(issues, `Invalid task: ${issues[0]?.message}`)
}

export const taskHandlers = defineHandlers({
  'tasks.submit': ({ caller, body, services }) => submitTask(services, caller, body),
  'tasks.list': (ctx) =>
    listPage('tasks.list', 'tasks', ctx, (page, filter) => ctx.services.tasks.list(ctx.caller.id, page, filter)),
  'tasks.get': ({ caller, params, services }) => services.tasks.get(caller.id, params.id),
  // Paged forward by `seq` (`after`), already a keyset: no cursor of its own.
  'tasks.events': async ({ caller, params, query, services }) => ({
    ...(await services.tasks.events(caller.id, params.id, query.after, query.limit)),
    next_cursor: null,
  }),
  'tasks.cancel': ({ caller, params, services }) => services.tasks.cancel(caller.id, params.id),
  'tasks.interrupt': ({ caller, params, services }) => services.tasks.steer.interrupt(caller.id, params.id),
  'tasks.messages.send': ({ caller, params, body, services }) =>
    services.tasks.steer.message(caller.id, params.id, body.text),
  'tasks.approvals.list': async ({ caller, params, services }) => {
    const approvals = await services.tasks.steer.approvals(caller.id, params.id)
    return { approvals, total: approvals.length, next_cursor: null }
  },
  'tasks.approvals.decide': ({ caller, params, body, services }) =>
    services.tasks.steer.decide(caller.id, params.id, params.request_id, body),
})
