import { defineHandlers } from '../route.js'

export const workspaceFileHandlers = defineHandlers({
  'workspaces.files.list': ({ caller, params, query, services, request }) =>
    services.workspaceFiles.list(caller.id, params.id, query.path, request.signal),
  'workspaces.files.upload': ({ caller, params, services, request }) =>
    services.workspaceFiles.upload(caller.id, params.id, request),
  'workspaces.files.download': async ({ caller, params, query, services, request }) => {
    const tar = await services.workspaceFiles.download(caller.id, params.id, query.path, request.signal)
    return new Response(tar, {
      headers: {
        'content-type': 'application/x-tar',
        'content-disposition': `attachment; filename="${params.id}.tar"`,
      },
    })
  },
})
