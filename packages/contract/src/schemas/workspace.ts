import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, Name, Timestamp } from './common.js'
import { ModelId } from './profile.js'

/** `starting` · `running` (container warm) · `idle` (container released, files and transcript kept). A failed task fails the task, never its workspace. */
export const WorkspaceStatus = v.picklist(['starting', 'running', 'idle'])

const Tags = v.pipe(v.array(v.pipe(v.string(), minLength(1), maxLength(50))), maxLength(50))

/** A workspace as listed. */
export const WorkspaceSummary = v.object({
  id: Id('workspace'),
  session_id: v.string(),
  profile_id: v.nullable(Id('profile')),
  status: WorkspaceStatus,
  name: Name,
  starred: v.boolean(),
  pinned: v.boolean(),
  archived: v.boolean(),
  tags: Tags,
  public_preview: v.boolean(),
  model_override: v.nullable(ModelId),
  created_at: Timestamp,
  updated_at: Timestamp,
  last_active_at: Timestamp,
})

/** Work a session's living agent left running in the background: a `run_in_background` shell, a server, a watcher, a subagent. */
export const BackgroundTask = v.object({
  id: v.string(),
  /** Claude Code's kind of task: `local_bash`, `local_agent`, `monitor`... */
  kind: v.string(),
  description: v.string(),
  /** When it started. */
  since: Timestamp,
})

/**
 * A session's agent while it lives between tasks: Claude Code kept up in the warm container
 * with its input open, so a follow-up is its next message and what it started runs on.
 */
export const LivingAgent = v.object({
  /** When this agent started. */
  since: Timestamp,
  /** Tasks it has served. */
  tasks: v.number(),
  /** What it left running in the background, now. */
  background: v.array(BackgroundTask),
})

/** The full workspace. */
export const Workspace = v.object({
  ...WorkspaceSummary.entries,
  /** The warm container, while `running`. */
  container_id: v.nullable(Id('container')),
  /** The agent conversation's id, for resuming. */
  persistent: v.boolean(),
  /** The workspace and task this one was forked from (`POST /v1/workspaces/:id/fork`), or null. */
  forked_from: v.nullable(v.object({ workspace_id: Id('workspace'), task_id: Id('task') })),
  /** The session's living agent, while its container is warm (null otherwise: the next follow-up starts one and resumes the conversation). */
  agent: v.nullable(LivingAgent),
})

/** Body of `PATCH /v1/workspaces/:id`: only these fields. */
export const UpdateWorkspace = v.strictObject({
  name: v.optional(Name),
  starred: v.optional(v.boolean()),
  pinned: v.optional(v.boolean()),
  archived: v.optional(v.boolean()),
  tags: v.optional(Tags),
  public_preview: v.optional(v.boolean()),
  model_override: v.optional(v.nullable(ModelId)),
})

/** Body of `POST /v1/workspaces/:id/fork`: the task to fork at (default: the latest finished one). */
export const ForkWorkspace = v.strictObject({
  at_task_id: v.optional(Id('task')),
})

/** Body of `POST /v1/workspaces/:id/rewind`: the finished task of the session to take it back to. */
export const RewindWorkspace = v.strictObject({
  to_task_id: Id('task'),
})

/** A finished session task's checkpoint: the workspace's files and conversation as the task left them. */
export const Checkpoint = v.object({
  task_id: Id('task'),
  /** When it was kept (the task's end). */
  created_at: Timestamp,
  /** Regular files in the workspace then (its conversation under `.berth/claude` included). */
  files: v.pipe(v.number(), v.integer()),
  /** Their bytes. */
  bytes: v.pipe(v.number(), v.integer()),
  /** Bytes this checkpoint added to storage: the contents no other kept checkpoint of the session held, and its manifest. */
  added_bytes: v.pipe(v.number(), v.integer()),
})

export type Workspace = v.InferOutput<typeof Workspace>
export type WorkspaceSummary = v.InferOutput<typeof WorkspaceSummary>
export type WorkspaceStatus = v.InferOutput<typeof WorkspaceStatus>
export type UpdateWorkspace = v.InferOutput<typeof UpdateWorkspace>
export type ForkWorkspace = v.InferOutput<typeof ForkWorkspace>
export type LivingAgent = v.InferOutput<typeof LivingAgent>
export type BackgroundTask = v.InferOutput<typeof BackgroundTask>
export type RewindWorkspace = v.InferOutput<typeof RewindWorkspace>
export type Checkpoint = v.InferOutput<typeof Checkpoint>
