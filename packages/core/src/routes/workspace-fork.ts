import { Checkpoint } from '@berth/contract'
import { toView } from '../records/view.js'
import { defineHandlers } from '../route.js'

export const workspaceForkHandlers = defineHandlers({
  'workspaces.fork': ({ caller, params, body, services }) => services.forkWorkspace(caller.id, params.id, body),
  'workspaces.rewind': ({ caller, params, body, services }) => services.rewindWorkspace(caller.id, params.id, body),
  'workspaces.checkpoints': async ({ caller, params, services }) => {
    await services.workspaces.assert(caller.id, params.id)
    const kept = await services.checkpoints.list(caller.id, params.id)
    const checkpoints = kept.map((c) => toView(Checkpoint, c))
    // Every one there is (at most the operator's number per session): one page.
    return { checkpoints, total: checkpoints.length, next_cursor: null }
  },
})
