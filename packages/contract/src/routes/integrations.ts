import { defineRoute } from '../route.js'
import { IdParams, ListOf } from '../schemas/common.js'
import {
  CreateIntegration,
  Delivery,
  DeliveryListQuery,
  Integration,
  IntegrationListQuery,
  UpdateIntegration,
} from '../schemas/integration.js'
import { crudRoutes } from './crud.js'

const [listIntegrations, createIntegration, getIntegration, updateIntegration, deleteIntegration] = crudRoutes({
  area: 'integrations',
  base: '/v1/integrations',
  idKind: 'integration',
  label: 'integration',
  item: Integration,
  create: CreateIntegration,
  update: UpdateIntegration,
  filters: { type: IntegrationListQuery.entries.type },
  createNote:
    "Creates `webhook` (config `url`, optional `secret` for the HMAC signature) and `email` (config `recipients`) integrations; the chat, mail, messenger and banking types are connected through their own flows (400 here). Secret config fields (`bot_token`, `refresh_token`, `access_token`, `api_key`, `secret`) are encrypted at rest and read `••••••••` in every response; a PATCH that sends `••••••••` back keeps the stored value, and `config` otherwise replaces the stored one. Webhook URLs that resolve to private, loopback or link-local addresses are refused unless the deployment allows them. Enabled integrations whose scope covers a task's profile receive `{ event, task | run, at }` when a task completes or fails and when a playbook run ends.",
})

export const integrationRoutes = [
  listIntegrations,
  createIntegration,
  getIntegration,
  updateIntegration,
  deleteIntegration,
  defineRoute({
    name: 'integrations.test',
    method: 'POST',
    path: '/v1/integrations/:id/test',
    auth: 'caller',
    tag: 'integrations',
    summary: 'Send a test notification now',
    description:
      'One attempt, now, recorded like any delivery. 200 with the delivery when the third party accepted it; 502 BAD_GATEWAY with the delivery in `details.delivery` when it did not (its status, or the connection error).',
    params: IdParams('integration'),
    response: Delivery,
    errors: ['BAD_GATEWAY'],
  }),
  defineRoute({
    name: 'integrations.deliveries',
    method: 'GET',
    path: '/v1/integrations/:id/deliveries',
    auth: 'caller',
    tag: 'integrations',
    summary: "An integration's delivery attempts, newest first",
    description:
      "Every attempt of every notification (the last 200 are kept): event, attempt number, outcome, the receiver's status, the error, and whether a retry follows.",
    params: IdParams('integration'),
    query: DeliveryListQuery,
    response: ListOf('deliveries', Delivery),
  }),
] as const
