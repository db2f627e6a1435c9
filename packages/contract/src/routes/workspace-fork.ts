import { defineRoute } from '../route.js'
import { IdParams } from '../schemas/common.js'
import { ForkWorkspace, Workspace } from '../schemas/workspace.js'

export const workspaceFork = defineRoute({
  name: 'workspaces.fork',
  method: 'POST',
  path: '/v1/workspaces/:id/fork',
  auth: 'caller',
  tag: 'workspaces',
  summary: 'Fork a session: a new workspace with a copy of its files and conversation',
  description:
    'The new workspace (and its `session_id`) is yours, with a copy of the workspace’s files as they are now and its conversation up to `at_task_id`, which must be the latest finished task of the workspace (the default; an earlier one is 409, since the files cannot be taken back to it). Its transcript starts with a copy of the original’s events and its view names `forked_from`. The original is not touched. The body may be left out (the default fork). A task running or queued in the workspace is 409; a batch task’s workspace is 400; a task of another workspace is 400. Copying the files out of the workspace’s container or volume can fail with 502 `CONTAINER_FAILED`.',
  params: IdParams('workspace'),
  body: ForkWorkspace,
  bodyOptional: true,
  response: Workspace,
  status: 201,
  errors: ['CONFLICT', 'CONTAINER_FAILED'],
})
