import { defineHandlers } from '../route.js'

export const webhookTriggerHandlers = defineHandlers({
  'playbooks.trigger': ({ params, request, services }) =>
    services.webhookTrigger.fire(params.id, params.secret, request),
})
