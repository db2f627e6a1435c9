import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'
import { EventsQuery, TranscriptEvent } from '../schemas/task.js'
import { UpdateWorkspace, Workspace, WorkspaceStatus, WorkspaceSummary } from '../schemas/workspace.js'

export const workspaceRoutes = [
  defineRoute({
    name: 'workspaces.list',
    method: 'GET',
    path: '/v1/workspaces',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'List your workspaces',
    description:
      'Playbook-only workspaces (session ids starting `pb-`) are left out unless claimed as a messenger thread.',
    query: v.object({ ...PageQuery, status: v.optional(WorkspaceStatus) }),
    response: ListOf('workspaces', WorkspaceSummary),
  }),
  defineRoute({
    name: 'workspaces.get',
    method: 'GET',
    path: '/v1/workspaces/:id',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Read one workspace',
    params: IdParams('workspace'),
    response: Workspace,
  }),
  defineRoute({
    name: 'workspaces.update',
    method: 'PATCH',
    path: '/v1/workspaces/:id',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Update name, starred, pinned, archived, tags, public_preview or model_override',
    params: IdParams('workspace'),
    body: UpdateWorkspace,
    response: Workspace,
    description:
      '`model_override` must be a model the credential of the workspace’s profile allows (400 naming it otherwise); `null` goes back to the profile’s model.',
  }),
  defineRoute({
    name: 'workspaces.delete',
    method: 'DELETE',
    path: '/v1/workspaces/:id',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Delete a workspace for good: its container, volume, transcript and row',
    params: IdParams('workspace'),
    status: 204,
  }),
  defineRoute({
    name: 'workspaces.stop',
    method: 'POST',
    path: '/v1/workspaces/:id/stop',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Stop a session now: its living agent and what it left running end, its container is released',
    description:
      'What the idle timer does after 15 idle minutes (`sessionIdleMs`), now: the session’s living agent ends (its background shells, servers and watchers stop), its files and conversation are kept, and its container, memory and running-workspace slot go back. The next follow-up resumes the conversation in a new container. A workspace without a warm container is answered as it is. 409 while a task of the workspace is queued or under way (cancel it first). A container another instance holds is released there; 502 `CONTAINER_FAILED` if that instance does not within 10 s.',
    params: IdParams('workspace'),
    response: Workspace,
    errors: ['CONFLICT', 'CONTAINER_FAILED'],
  }),
  defineRoute({
    name: 'workspaces.transcript',
    method: 'GET',
    path: '/v1/workspaces/:id/transcript',
    auth: 'caller',
    tag: 'workspaces',
    summary: "The workspace's event log: every token, tool call, tool result, user message and turn boundary",
    params: IdParams('workspace'),
    query: EventsQuery,
    response: ListOf('events', TranscriptEvent),
  }),
] as const
