import { defineHandlers } from '../route.js'

export const messengerHandlers = defineHandlers({
  'integrations.messenger.config': ({ caller, services }) => services.messenger.config(caller.id),
  'integrations.messenger.setup': ({ caller, body, services, request }) =>
    services.messenger.setup(caller.id, body, new URL(request.url).origin),
  'integrations.messenger.claim': ({ caller, services }) => services.messenger.claim(caller.id),
  'integrations.messenger.webhook': ({ request, services }) => services.messenger.webhook.handle(request),
})
