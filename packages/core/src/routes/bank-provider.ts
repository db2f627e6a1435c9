import { defineHandlers } from '../route.js'

export const bankProviderHandlers = defineHandlers({
  'integrations.bankprovider.config': ({ caller, body, services }) => services.bankProvider.setConfig(caller.id, body),
  'integrations.bankprovider.callback': ({ caller, body, services }) => services.bankProvider.connect(caller.id, body),
})
