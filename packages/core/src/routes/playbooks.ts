import { defineHandlers } from '../route.js'
import { listPage } from './paging.js'

export const playbookHandlers = defineHandlers({
  'profiles.playbooks': (ctx) =>
    listPage('profiles.playbooks', 'playbooks', ctx, (page) =>
      ctx.services.playbooks.listForProfile(ctx.caller.id, ctx.params.id, page),
    ),
  'playbooks.create': ({ caller, body, services }) => services.playbooks.create(caller.id, body),
  'playbooks.get': ({ caller, params: p, services }) => services.playbooks.get(caller.id, p.id),
  'playbooks.update': ({ caller, params: p, body, services }) => services.playbooks.update(caller.id, p.id, body),
  'playbooks.delete': async ({ caller, params: p, services }) => {
    await services.playbooks.remove(caller.id, p.id)
  },
  'playbooks.run': async ({ caller, params: p, services }) =>
    services.playbookRuns.start(await services.playbooks.records.get(caller.id, p.id), 'manual'),
  'playbooks.runs': async (ctx) => {
    const { caller, params: p, services } = ctx
    await services.playbooks.records.get(caller.id, p.id)
    return listPage('playbooks.runs', 'runs', ctx, (page, filter) =>
      services.playbookRuns.list(caller.id, p.id, page, filter),
    )
  },
  'playbooks.rotateWebhookSecret': ({ caller, params: p, services }) =>
    services.playbooks.rotateSecret(caller.id, p.id),
})
