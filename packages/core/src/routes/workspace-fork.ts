import { defineHandlers } from '../route.js'

export const workspaceForkHandlers = defineHandlers({
  'workspaces.fork': ({ caller, params, body, services }) => services.forkWorkspace(caller.id, params.id, body),
})
