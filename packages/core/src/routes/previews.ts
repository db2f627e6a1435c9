import { defineHandlers } from '../route.js'

export const previewHandlers = defineHandlers({
  'workspaces.previews.create': ({ caller, params, body, services, request }) =>
    services.previews.create(caller.id, params.id, body, services.publicUrl ?? new URL(request.url).origin),
  'workspaces.previews.list': ({ caller, params, services }) => services.previews.list(caller.id, params.id),
  'workspaces.previews.revoke': ({ caller, params, services }) =>
    services.previews.revoke(caller.id, params.id, params.preview_id),
})
