import { defineRoute } from '../route.js'
import { IdParams, ListOf } from '../schemas/common.js'
import {
  ChatEvent,
  ChatEventAck,
  ChatEventListQuery,
  ConnectAuthorizeQuery,
  ConnectAuthorizeResponse,
  ConnectCallbackQuery,
  type ConnectType,
} from '../schemas/chat-mail.js'

const LABEL: Record<ConnectType, string> = { chatprovider: 'chat-workspace provider', mailprovider: 'mail provider' }
const DELIVERY: Record<ConnectType, string> = {
  chatprovider:
    "Notifications are posted to `config.channel` (a channel id or `#name`, null until you set it with `PATCH /v1/integrations/:id`) as the app's bot.",
  mailprovider:
    "Notifications are sent through the provider's send API from the connected mailbox to `config.recipients` (default: the mailbox itself; change it with `PATCH /v1/integrations/:id`).",
}

function authorizeRoute<const T extends ConnectType>(type: T) {
  return defineRoute({
    name: `integrations.${type}.authorize`,
    method: 'GET',
    path: `/v1/integrations/${type}/authorize`,
    auth: 'caller',
    tag: 'integrations',
    summary: `Begin connecting the ${LABEL[type]} (OAuth)`,
    description:
      `Answers \`{ url }\`: the provider's consent URL, carrying a \`state\` that is signed, expires after 10 minutes, works once and is bound to you and \`returnPath\`${type === 'mailprovider' ? ' (and a PKCE S256 challenge)' : ''}. ` +
      'It answers JSON rather than redirecting because this route needs your bearer key, which a browser navigation cannot send: fetch it, then send the browser to `url`. ' +
      `After consent the provider sends the browser to \`GET /api/${type}/callback\`, which creates the \`${type}\` integration and redirects to \`returnPath\`. ` +
      '`returnPath` (default `/`) must be a local path: one leading `/`, no `//`, scheme, backslash, whitespace or control characters. ' +
      `404 when this server has no ${LABEL[type]} configured.`,
    query: ConnectAuthorizeQuery,
    response: ConnectAuthorizeResponse,
    errors: ['NOT_FOUND'],
  })
}

function callbackRoute<const T extends ConnectType>(type: T) {
  return defineRoute({
    name: `integrations.${type}.callback`,
    method: 'GET',
    path: `/api/${type}/callback`,
    // The provider sends the browser here without Berth credentials: the caller is the one
    // the signed `state` was issued to.
    auth: 'public',
    tag: 'integrations',
    summary: `OAuth return URL of the ${LABEL[type]}: create the integration and redirect back`,
    description:
      'No credentials needed: the caller is the one the signed `state` was issued to. ' +
      'A state that is malformed, forged, already used, expired, issued for another flow or — when the request carries a caller key — issued to another caller is a 400 VALIDATION_FAILED and nothing is stored. ' +
      `Otherwise the code is exchanged, the account is read from the provider, and the \`${type}\` integration is created (enabled, scope \`all\`; connecting the same ${type === 'chatprovider' ? 'workspace' : 'mailbox'} again updates the existing one and sets its \`status\` back to \`connected\`), its tokens encrypted at rest and read \`••••••••\` in every response. ` +
      `${DELIVERY[type]} Access tokens are refreshed before they expire; once the provider revokes the grant the integration's \`status\` is \`needs_reconnect\` and its deliveries fail (recorded, no retries) until you connect it again. ` +
      `The answer is a 302 to the flow's \`returnPath\` with \`integration=connected&type=${type}&id=<int_id>\`, or \`integration=error&type=${type}&reason=<reason>\` (\`access_denied\` when the user declined, \`invalid_code\`, \`provider_rejected_client\`, \`provider_unavailable\`).`,
    query: ConnectCallbackQuery,
    status: 302,
  })
}

export const chatProviderEvents = defineRoute({
  name: 'integrations.chatprovider.events',
  method: 'POST',
  path: '/api/chatprovider/events',
  auth: 'public',
  tag: 'integrations',
  summary: 'Events from the chat-workspace provider (signature-verified)',
  description:
    'The provider\'s Events API request URL. Verified before anything else: `X-Request-Timestamp` (Unix seconds) must be within 5 minutes of the server time and `X-Signature` must be `v0=<hex HMAC-SHA256(signing_secret, "v0:" + timestamp + ":" + raw body)>` (compared in constant time), with the deployment\'s signing secret (`createBerth({ chatProvider: { signingSecret } })`); a missing header, stale timestamp or wrong signature is a 401 UNAUTHORIZED and nothing is done. ' +
    'A `url_verification` request is answered with `{ challenge }`. An `event_callback` is recorded once per `event_id` (the provider retries) for every chat integration connected to its workspace (`team_id`); read them with `GET /v1/integrations/:id/events`. Events start nothing; every verified request is acknowledged with 200 `{ ok: true, recorded }` so the provider does not retry. Bodies up to 256 KiB.',
  rawBody: 'An Events API request of the chat provider, as JSON (signed over its raw bytes).',
  response: ChatEventAck,
  errors: ['UNAUTHORIZED', 'VALIDATION_FAILED', 'PAYLOAD_TOO_LARGE'],
})

export const listChatEvents = defineRoute({
  name: 'integrations.events',
  method: 'GET',
  path: '/v1/integrations/:id/events',
  auth: 'caller',
  tag: 'integrations',
  summary: "Events the chat provider sent to an integration's workspace, newest first",
  description:
    'What `POST /api/chatprovider/events` recorded for this integration (the last 100): the event type, channel, user, text and whether it mentions the bot. Empty for integrations of other types.',
  params: IdParams('integration'),
  query: ChatEventListQuery,
  response: ListOf('events', ChatEvent),
})

/** The chat-workspace and mail provider routes: OAuth authorize and callback, chat events. */
export const chatMailRoutes = [
  authorizeRoute('chatprovider'),
  authorizeRoute('mailprovider'),
  callbackRoute('chatprovider'),
  callbackRoute('mailprovider'),
  chatProviderEvents,
  listChatEvents,
] as const
