import { defineRoute } from '../route.js'
import { BankConnectPayload, BankProviderConfig, SetBankProviderConfig } from '../schemas/bank-provider.js'
import { Integration } from '../schemas/integration.js'

export const bankProviderRoutes = [
  defineRoute({
    name: 'integrations.bankprovider.config',
    method: 'POST',
    path: '/v1/integrations/bankprovider/config',
    auth: 'caller',
    tag: 'integrations',
    summary: "Set the banking-data provider's connect-widget settings",
    description:
      "Stores what your dashboard starts the provider's connect widget with: `application_id` (from the provider's dashboard), `environment` (`sandbox`, `development` or `production`), `products` (default `balance`, `transactions`) and `select_account` (default `multiple`). Nothing here is secret: the widget runs in the browser with these values. Sending it again replaces them. Answers the stored settings.",
    body: SetBankProviderConfig,
    response: BankProviderConfig,
  }),
  defineRoute({
    name: 'integrations.bankprovider.callback',
    method: 'POST',
    path: '/v1/integrations/bankprovider/callback',
    auth: 'caller',
    tag: 'integrations',
    summary: "Connect a bank: hand over the connect widget's success payload",
    description:
      "Send the widget's `onSuccess` payload as it came (`{ accessToken, enrollment: { id, institution: { name } }, user: { id } }`). Berth verifies the access token with the provider (`GET /accounts`, HTTP Basic with the token) before storing anything, then answers 201 with a `bankprovider` integration: `access_token` encrypted at rest and `••••••••` in every response, plus the enrollment, institution and a summary of the accounts. Connecting an enrollment you connected before refreshes that integration. " +
      "The provider refusing the token, failing (5xx) or not answering in time is a 502 BAD_GATEWAY with `details.reason` (`unauthorized`, `unavailable`, `rejected`) and the provider's status and error code; nothing is stored. A token whose accounts belong to another enrollment is a 400 naming `enrollment.id`. " +
      "A banking integration is a data source, not a notification channel: notifications skip it, and `POST /v1/integrations/:id/test` checks that the provider still accepts its token. `signatures` (present when the widget was started with a nonce) are not verified here: verifying them needs the provider's signing key.",
    body: BankConnectPayload,
    response: Integration,
    status: 201,
    errors: ['BAD_GATEWAY'],
  }),
] as const
