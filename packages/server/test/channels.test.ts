/**
 * The channel conformance suite (`@berth/testkit`) against every channel: the server's
 * webhook, email (a real SMTP server), chat and mail provider transports, and core's banking
 * and messenger channels as `createServices` registers them, each against its local fake.
 */
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { createAesGcmCipher, createServices, type Channel, type ServicesOptions } from '@berth/core'
import { pkcePair } from '../../core/src/integrations/oauth-state.js'
import { channelConformanceSuite, type ChannelPeer } from '@berth/testkit'
import {
  startFakeBankProvider,
  startFakeChatProvider,
  startFakeMailProvider,
  startFakeMessenger,
} from '@berth/testkit/providers'
import { memoryStore } from '@berth/server'
import { createChatProvider, createMailProvider, emailChannel, webhookChannel } from '../src/notifiers/index.js'
import { createBankApi } from '../src/notifiers/bank-api.js'
import { createMessengerApi } from '../src/notifiers/messenger-api.js'
import { startReceiver, startSmtp } from './receivers.js'

const secret = `whsec-${randomBytes(8).toString('hex')}`

/** A small HTTP peer answering every request `status` with `body` (a provider's error answer the fakes do not make). */
async function answering(status: number, body: unknown): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req, res) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
  )
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  const close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections()
      server.close(() => r())
    })
  return { url: `http://127.0.0.1:${port}`, close }
}

/** Core's channel of a type, as `createServices` registers it. */
function coreChannel(type: string, o: Partial<ServicesOptions>): Channel {
  const services = createServices({
    store: memoryStore(),
    cipher: createAesGcmCipher(new Uint8Array(randomBytes(32))),
    ...o,
  })
  return services.channels.get(type)!
}

/** Consent at an OAuth fake and exchange the code: a working access token. */
async function grant(oauth: ReturnType<typeof createChatProvider>['connect']['oauth']): Promise<string> {
  const redirectUri = 'http://127.0.0.1:1/callback'
  const { verifier, challenge } = pkcePair()
  const res = await fetch(
    oauth.authorizeUrl({ state: 'conformance', redirectUri, codeChallenge: oauth.pkce ? challenge : null }),
    { redirect: 'manual' },
  )
  const code = new URL(res.headers.get('location')!).searchParams.get('code')!
  return (await oauth.exchangeCode({ code, redirectUri, codeVerifier: oauth.pkce ? verifier : null })).access_token
}

channelConformanceSuite('webhook', {
  async working() {
    const r = await startReceiver()
    return {
      channel: webhookChannel({ allowPrivate: true }),
      config: { url: r.url, secret },
      received: () => r.received.map((x) => x.body),
      close: r.close,
    }
  },
  async refusing() {
    const r = await startReceiver(() => 410)
    return {
      channel: webhookChannel({ allowPrivate: true }),
      config: { url: r.url, secret },
      received: () => [],
      close: r.close,
    }
  },
  async failing() {
    const r = await startReceiver(() => 503)
    return {
      channel: webhookChannel({ allowPrivate: true }),
      config: { url: r.url, secret },
      received: () => [],
      close: r.close,
    }
  },
  pointedAt: ({ url }, timeoutMs) => ({
    channel: webhookChannel({ allowPrivate: true, timeoutMs }),
    config: { url: `${url}/hook`, secret },
  }),
  secrets: [secret],
})

const smtpPass = `smtp-${randomBytes(8).toString('hex')}`
const smtpAt = (host: string, port: number, auth = { user: 'berth', pass: smtpPass }) => ({
  host,
  port,
  from: 'berth@example.test',
  auth,
  ignoreTLS: true,
})
const email = async (reject?: number): Promise<ChannelPeer> => {
  const smtp = await startSmtp(reject ? { reject } : {})
  return {
    channel: emailChannel({ smtp: smtpAt('127.0.0.1', smtp.port, smtp.auth) }),
    config: { recipients: ['ops@example.test'] },
    received: () => smtp.mails.map((m) => `${m.subject ?? ''}\n${m.text ?? ''}`),
    close: smtp.close,
  }
}
channelConformanceSuite('email', {
  working: () => email(),
  refusing: () => email(550),
  failing: () => email(451),
  pointedAt: ({ host, port }, timeoutMs) => ({
    channel: emailChannel({ smtp: smtpAt(host, port), timeoutMs }),
    config: { recipients: ['ops@example.test'] },
  }),
  protocol: 'smtp',
  secrets: [smtpPass, Buffer.from(smtpPass).toString('base64'), Buffer.from(`\0berth\0${smtpPass}`).toString('base64')],
})

const chatToken = 'xoxb-conformance-token-never-in-errors'
const chat = async (
  setUp?: (fake: Awaited<ReturnType<typeof startFakeChatProvider>>) => void,
): Promise<ChannelPeer> => {
  const fake = await startFakeChatProvider()
  const provider = createChatProvider(fake.config())
  const token = await grant(provider.connect.oauth)
  setUp?.(fake)
  return {
    channel: provider.channel,
    config: { channel: '#general', access_token: token },
    received: () => fake.messages.map((m) => m.text),
    close: fake.close,
  }
}
channelConformanceSuite('chatprovider', {
  working: () => chat(),
  refusing: () => chat((f) => f.failNext('channel_not_found')),
  failing: () => chat((f) => f.failNext('ratelimited')),
  unauthorized: () => chat((f) => f.revokeAll()),
  pointedAt: ({ url }, timeoutMs) => ({
    channel: createChatProvider({ clientId: 'c', clientSecret: 's', apiBaseUrl: url }, { timeoutMs }).channel,
    config: { channel: '#general', access_token: chatToken },
  }),
  secrets: [chatToken],
})

const mailToken = 'ya29.conformance-token-never-in-errors'
const mail = async (o: { scopes?: string[]; revoke?: boolean } = {}): Promise<ChannelPeer> => {
  const fake = await startFakeMailProvider()
  const provider = createMailProvider({ ...fake.config(), ...(o.scopes && { scopes: o.scopes }) })
  const token = await grant(provider.connect.oauth)
  if (o.revoke) fake.revokeAll()
  return {
    channel: provider.channel,
    config: { email: fake.user.email, recipients: ['ops@example.test'], access_token: token },
    received: () => fake.sent.map((m) => `${m.subject}\n${m.text}`),
    close: fake.close,
  }
}
const mailAt = (url: string, timeoutMs?: number) => ({
  channel: createMailProvider(
    { clientId: 'c', clientSecret: 's', apiBaseUrl: url },
    timeoutMs === undefined ? {} : { timeoutMs },
  ).channel,
  config: { email: 'ada@example.test', recipients: ['ops@example.test'], access_token: mailToken },
})
channelConformanceSuite('mailprovider', {
  working: () => mail(),
  // A grant without the send scope: 403 PERMISSION_DENIED.
  refusing: () => mail({ scopes: ['openid', 'email'] }),
  async failing() {
    const peer = await answering(503, {
      error: { code: 503, message: 'The service is currently unavailable.', status: 'UNAVAILABLE' },
    })
    return { ...mailAt(peer.url), received: () => [], close: peer.close }
  },
  unauthorized: () => mail({ revoke: true }),
  pointedAt: ({ url }, timeoutMs) => mailAt(url, timeoutMs),
  secrets: [mailToken],
})

const bankPeer = async (
  setUp: (fake: Awaited<ReturnType<typeof startFakeBankProvider>>, token: string) => string,
): Promise<ChannelPeer> => {
  const fake = await startFakeBankProvider()
  const token = setUp(fake, fake.enroll().accessToken)
  return {
    channel: coreChannel('bankprovider', { bankApi: createBankApi({ apiBaseUrl: fake.url }) }),
    config: { access_token: token },
    received: () => fake.requests.filter((r) => r.status === 200).map((r) => `${r.method} ${r.path}`),
    close: fake.close,
  }
}
const bankToken = 'token_conformance_never_in_errors'
channelConformanceSuite('bankprovider', {
  event: 'integration.test',
  working: () => bankPeer((_f, token) => token),
  refusing: () =>
    bankPeer((f, token) => {
      f.revoke(token)
      return token
    }),
  failing: () =>
    bankPeer((f, token) => {
      f.fail({ status: 503 })
      return token
    }),
  pointedAt: ({ url }, timeoutMs) => ({
    channel: coreChannel('bankprovider', { bankApi: createBankApi({ apiBaseUrl: url, timeoutMs }) }),
    config: { access_token: bankToken },
  }),
  secrets: [bankToken],
})

const botToken = '123456:conformance-bot-token-never-in-errors'
const messengerPeer = async (
  setUp?: (fake: Awaited<ReturnType<typeof startFakeMessenger>>) => number | undefined,
): Promise<ChannelPeer> => {
  const fake = await startFakeMessenger()
  const bot = fake.createBot()
  // The bot may write only to a chat that wrote to it (no webhook is registered: the update goes nowhere).
  const chat = fake.chat()
  await fake.sendUpdate(bot.token, { chat, text: 'hello' }).catch(() => undefined)
  const chatId = setUp?.(fake) ?? chat.id
  return {
    channel: coreChannel('messenger', { messenger: { api: createMessengerApi({ apiBaseUrl: fake.url }) } }),
    config: { bot_token: bot.token, chat_id: chatId },
    received: () => fake.sent.map((m) => m.text),
    close: fake.close,
  }
}
channelConformanceSuite('messenger', {
  working: () => messengerPeer(),
  // A chat the bot is not in: 400 Bad Request: chat not found.
  refusing: () => messengerPeer(() => 987_654_321),
  failing: () =>
    messengerPeer((f) => {
      f.fail({ status: 502 })
      return undefined
    }),
  pointedAt: ({ url }, timeoutMs) => ({
    channel: coreChannel('messenger', { messenger: { api: createMessengerApi({ apiBaseUrl: url, timeoutMs }) } }),
    config: { bot_token: botToken, chat_id: 42 },
  }),
  secrets: [botToken],
})
