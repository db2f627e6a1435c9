import { crudHandlers } from './crud.js'

export const environmentHandlers = crudHandlers('environments', (s) => s.environments)
