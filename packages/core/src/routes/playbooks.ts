import { defineHandlers } from '../route.js'

export const playbookHandlers = defineHandlers({
  'profiles.playbooks': async ({ caller, params: p, query, services }) => {
    const { items, total } = await services.playbooks.listForProfile(caller.id, p.id, query)
    return { playbooks: items, total }
  },
  'playbooks.create': ({ caller, body, services }) => services.playbooks.create(caller.id, body),
  'playbooks.get': ({ caller, params: p, services }) => services.playbooks.get(caller.id, p.id),
  'playbooks.update': ({ caller, params: p, body, services }) => services.playbooks.update(caller.id, p.id, body),
  'playbooks.delete': async ({ caller, params: p, services }) => {
    await services.playbooks.remove(caller.id, p.id)
  },
  'playbooks.run': async ({ caller, params: p, services }) =>
    services.playbookRuns.start(await services.playbooks.records.get(caller.id, p.id), 'manual'),
  'playbooks.runs': async ({ caller, params: p, query, services }) => {
    await services.playbooks.records.get(caller.id, p.id)
    const { items, total } = await services.playbookRuns.list(caller.id, p.id, query, { status: query.status })
    return { runs: items, total }
  },
  'playbooks.rotateWebhookSecret': ({ caller, params: p, services }) =>
    services.playbooks.rotateSecret(caller.id, p.id),
})
