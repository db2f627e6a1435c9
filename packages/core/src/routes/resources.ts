import { defineHandlers } from '../route.js'
import { crudHandlers } from './crud.js'

export const resourceHandlers = defineHandlers({
  ...crudHandlers('profiles', (s) => s.profiles),
  ...crudHandlers('api-keys', (s) => s.apiKeys),
  ...crudHandlers('memory', (s) => s.memory),
  ...crudHandlers('secrets', (s) => s.secrets),
  ...crudHandlers('tools', (s) => s.tools),
  ...crudHandlers('skills', (s) => s.skills),
  ...crudHandlers('agents', (s) => s.agents),
  'profiles.models': async ({ caller, params, services }) => {
    const models = await services.profiles.models(caller.id, params.id)
    return { models, total: models.length, next_cursor: null }
  },
})
