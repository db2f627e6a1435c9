import { defineRoute } from '../route.js'
import { MessengerClaimCode, MessengerConfig, MessengerSetup, MessengerWebhookAck } from '../schemas/messenger-bot.js'

export const messengerRoutes = [
  defineRoute({
    name: 'integrations.messenger.config',
    method: 'GET',
    path: '/v1/integrations/messenger/config',
    auth: 'caller',
    tag: 'integrations',
    summary: 'Your messenger bot: who it is, its webhook, its claimed chat',
    description:
      '`configured: false` until a bot is set up. Then the bot (`id`, `username`, `name`), the webhook the provider delivers to (`url`, `registered_at`, `last_update_at`: when the last verified update arrived) and the claim: whether a chat is bound (`chat`: `id`, `type`, `title`), when, and when the newest unused claim code expires. Never the token.',
    response: MessengerConfig,
  }),
  defineRoute({
    name: 'integrations.messenger.setup',
    method: 'POST',
    path: '/v1/integrations/messenger/setup',
    auth: 'caller',
    tag: 'integrations',
    summary: 'Set up your messenger bot with its token',
    description:
      "Validates `bot_token` with the provider (`getMe`), registers this server's `POST /api/messenger/webhook` with a generated secret token (`setWebhook`), and stores a `messenger` integration (`bot_token` encrypted at rest, `••••••••` in every response). One bot per caller: setting up again replaces the token and the webhook secret (the same bot keeps its claimed chat; a different one starts unclaimed). " +
      'A token the provider refuses is a 400 naming `bot_token`; the provider failing or not answering is a 502 BAD_GATEWAY. Either way nothing is stored. Answers the configuration (as `GET /v1/integrations/messenger/config`). Next: `POST /v1/integrations/messenger/claim`.',
    body: MessengerSetup,
    response: MessengerConfig,
    errors: ['BAD_GATEWAY'],
  }),
  defineRoute({
    name: 'integrations.messenger.claim',
    method: 'POST',
    path: '/v1/integrations/messenger/claim',
    auth: 'caller',
    tag: 'integrations',
    summary: 'Get a one-time code that binds a chat to your bot',
    description:
      'Answers 201 with a `code` (e.g. `BERTH-7K2M9QXA`) that works once and expires after 10 minutes. Send it to the bot (as a message, or `/start <code>`) from the chat that should receive results; the bot confirms. A code sent again is refused with a reply. Playbook results then post to that chat, and replying to one continues the run in its workspace (which then appears in `GET /v1/workspaces`). 404 when no bot is set up.',
    response: MessengerClaimCode,
    status: 201,
    errors: ['NOT_FOUND'],
  }),
  defineRoute({
    name: 'integrations.messenger.webhook',
    method: 'POST',
    path: '/api/messenger/webhook',
    // The provider calls this without Berth credentials: the secret token it was given at
    // setup, in `X-Telegram-Bot-Api-Secret-Token`, is the credential.
    auth: 'public',
    tag: 'integrations',
    summary: 'Messenger bot updates (the provider calls this)',
    description:
      'Called by the messenger provider with one update (JSON) per request and the secret token registered at setup in `X-Telegram-Bot-Api-Secret-Token`. A missing or wrong token is a 401 and nothing is read or done. ' +
      "A message carrying a claim code binds its chat to the bot (once; reuse and expired codes get a reply saying so); in the bound chat, a reply to a playbook result continues that run's session with the reply as the prompt, and the answer is posted back. Every other update is acknowledged with `{ ok: true }`; a redelivered update is not acted on twice.",
    rawBody: "One update of the messenger's Bot API, as JSON.",
    response: MessengerWebhookAck,
    errors: ['UNAUTHORIZED', 'VALIDATION_FAILED', 'PAYLOAD_TOO_LARGE'],
  }),
] as const
