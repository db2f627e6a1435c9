import { defineRoute } from '../route.js'
import { IdParams, ListOf } from '../schemas/common.js'
import { Checkpoint, ForkWorkspace, RewindWorkspace, Workspace } from '../schemas/workspace.js'

/** Where a session's earlier tasks can be reached: one sentence every route here shares. */
const CHECKPOINTS =
  'Every finished task of a session that started running is a checkpoint: the workspace’s files (its conversation under `.berth/claude` included) and its conversation id as the task left them, kept content-addressed beside the records (the newest `BERTH_CHECKPOINT_MAX_PER_SESSION`, within the kept files’ retention; a workspace over `BERTH_CHECKPOINT_MAX_MB` is not checkpointed).'

export const workspaceFork = defineRoute({
  name: 'workspaces.fork',
  method: 'POST',
  path: '/v1/workspaces/:id/fork',
  auth: 'caller',
  tag: 'workspaces',
  summary: 'Fork a session: a new workspace with a copy of its files and conversation',
  description: `The new workspace (and its \`session_id\`) is yours. At the latest finished task (the default) it gets a copy of the workspace’s files as they are now and its whole conversation; at an earlier finished task \`at_task_id\`, that task’s checkpoint: its files, its conversation, and the transcript up to and including it. ${CHECKPOINTS} An earlier task without a checkpoint (past the retention, taken back by a rewind, over the cap, or from before checkpoints) is 409 saying which. Its transcript starts with a copy of the original’s events and its view names \`forked_from\`. The original is not touched. The body may be left out (the default fork). A task running or queued in the workspace is 409; a batch task’s workspace is 400; a task of another workspace is 400. Copying the files out of the workspace’s container or volume can fail with 502 \`CONTAINER_FAILED\`; files larger than the caller may keep are 413.`,
  params: IdParams('workspace'),
  body: ForkWorkspace,
  bodyOptional: true,
  response: Workspace,
  status: 201,
  errors: ['CONFLICT', 'CONTAINER_FAILED', 'PAYLOAD_TOO_LARGE'],
})

export const workspaceRewind = defineRoute({
  name: 'workspaces.rewind',
  method: 'POST',
  path: '/v1/workspaces/:id/rewind',
  auth: 'caller',
  tag: 'workspaces',
  summary: 'Take a session back to one of its finished tasks',
  description: `The session itself goes back to \`to_task_id\`’s checkpoint: its warm container is released, its files (its volume, for a persistent session) and its conversation become the checkpoint’s, and the checkpoints of later tasks are dropped. Nothing of the transcript is deleted: each later task gets \`rewound_at\`, and a \`rewind\` event (\`task_id\`: the task gone back to, \`rewound_task_ids\`: the later ones) is appended. The next follow-up runs on those files and resumes that conversation. ${CHECKPOINTS} A task running or queued in the workspace is 409, as is a task without a checkpoint, or a container another instance holds (rewind once it has idled out, or from that instance); another caller’s workspace or task is 404; a task of another workspace, or a batch task’s workspace, is 400.`,
  params: IdParams('workspace'),
  body: RewindWorkspace,
  response: Workspace,
  errors: ['CONFLICT', 'CONTAINER_FAILED', 'PAYLOAD_TOO_LARGE'],
})

export const workspaceCheckpoints = defineRoute({
  name: 'workspaces.checkpoints',
  method: 'GET',
  path: '/v1/workspaces/:id/checkpoints',
  auth: 'caller',
  tag: 'workspaces',
  summary: 'The checkpoints of a session: the tasks it can be forked at or rewound to',
  description: `Oldest first, every one there is (at most \`BERTH_CHECKPOINT_MAX_PER_SESSION\`). ${CHECKPOINTS}`,
  params: IdParams('workspace'),
  response: ListOf('checkpoints', Checkpoint),
})

/** Forks, rewinds and the checkpoints they start from. */
export const workspaceForkRoutes = [workspaceFork, workspaceRewind, workspaceCheckpoints] as const
