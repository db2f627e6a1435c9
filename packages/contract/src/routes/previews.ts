import * as v from 'valibot'
import { defineRoute } from '../route.js'
import { Id, IdParams, ListOf } from '../schemas/common.js'
import { CreatePreview, Preview, PreviewSummary } from '../schemas/preview.js'

const WHERE =
  "The link proxies HTTP (any method, streamed) and WebSocket traffic under `/preview/<token>/` to the port inside the workspace's session container, and to nothing else; it works while the session's container is warm, through any instance."

export const previewRoutes = [
  defineRoute({
    name: 'workspaces.previews.create',
    method: 'POST',
    path: '/v1/workspaces/:id/previews',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Open an expiring preview link to a port inside the session container',
    description: `${WHERE} The token in \`url\` is shown once (only its hash is kept). A batch task's workspace is 400; a workspace whose session has no warm container (not started yet, or idled out) is 409 CONFLICT: run a task in the session first.`,
    params: IdParams('workspace'),
    body: CreatePreview,
    response: Preview,
    status: 201,
    errors: ['CONFLICT'],
  }),
  defineRoute({
    name: 'workspaces.previews.list',
    method: 'GET',
    path: '/v1/workspaces/:id/previews',
    auth: 'caller',
    tag: 'workspaces',
    summary: "The workspace's preview links that have not expired or been revoked (without their tokens)",
    params: IdParams('workspace'),
    response: ListOf('previews', PreviewSummary),
  }),
  defineRoute({
    name: 'workspaces.previews.revoke',
    method: 'DELETE',
    path: '/v1/workspaces/:id/previews/:preview_id',
    auth: 'caller',
    tag: 'workspaces',
    summary: 'Revoke a preview link: its URL answers 404 from then on',
    params: v.object({ id: Id('workspace'), preview_id: Id('preview') }),
    status: 204,
  }),
] as const
