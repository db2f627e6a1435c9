/** A local fake of a Telegram-shaped messenger Bot API, over real HTTP, delivering updates to the registered webhook. */
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type {
  FakeMessengerOptions,
  FakeBot,
  FakeMessage,
  FakeSentMessage,
  FakeWebhook,
  FakeMessengerRequest,
  FakeMessengerFailure,
  FakeDelivery,
  FakeMessenger,
} from './messenger-provider-types.js'

interface BotState {
  bot: FakeBot
  webhook: FakeWebhook | null
  /** Messages per chat, by id; chats that wrote to the bot are known to it. */
  chats: Map<number, Map<number, FakeMessage>>
}

const SECRET_TOKEN = /^[A-Za-z0-9_-]{1,256}$/
const MAX_TEXT = 4096

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

function answer(res: ServerResponse, status: number, body: Record<string, unknown>): number {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
  return status
}

/** `{ ok: false, error_code, description }` with the same HTTP status, as the Bot API answers errors. */
const fail = (res: ServerResponse, code: number, description: string) =>
  answer(res, code, { ok: false, error_code: code, description })

/** The request's parameters: query string, then a JSON or form body. */
async function paramsOf(req: IncomingMessage, url: URL): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = Object.fromEntries(url.searchParams)
  const text = await readBody(req)
  if (!text) return out
  const type = req.headers['content-type'] ?? ''
  if (type.includes('json')) {
    const parsed: unknown = JSON.parse(text)
    if (parsed && typeof parsed === 'object') Object.assign(out, parsed)
  } else {
    for (const [k, v] of new URLSearchParams(text)) out[k] = /^[[{]/.test(v) ? JSON.parse(v) : v
  }
  return out
}

/**
 * A local fake of a Telegram-shaped Bot API, over real HTTP: `POST|GET /bot<token>/<method>`
 * with JSON, form or query parameters, answering `{ ok: true, result }` or
 * `{ ok: false, error_code, description }`. Methods: `getMe`; `setWebhook` (records `url`,
 * `secret_token`, `allowed_updates`; the secret must match `[A-Za-z0-9_-]{1,256}`; plain
 * http is accepted so tests can use 127.0.0.1), `deleteWebhook`, `getWebhookInfo`;
 * `sendMessage` (records the message and answers it with its `message_id`; the chat must
 * have written to the bot; `reply_parameters.message_id` or `reply_to_message_id` must
 * exist unless `allow_sending_without_reply`; 1–4096 characters). An unknown token is
 * `401 Unauthorized`, an unknown method `404 Not Found`. `sendUpdate()` plays a user
 * writing to the bot and delivers the update to the registered webhook with the secret
 * header, as the provider does.
 *
 * @example
 * ```ts
 * const tg = await startFakeMessenger()
 * const bot = tg.createBot({ username: 'berth_test_bot' })
 * // ... POST /v1/integrations/messenger/setup { bot_token: bot.token } on a Berth with messenger: { apiBaseUrl: tg.url }
 * await tg.sendUpdate(bot.token, { chat: tg.chat(), text: 'BERTH-AB12CD34' })
 * tg.sent.at(-1)?.text // the bot's reply
 * ```
 */
export async function startFakeMessenger(opts: FakeMessengerOptions = {}): Promise<FakeMessenger> {
  const bots = new Map<string, BotState>()
  const sent: FakeSentMessage[] = []
  const requests: FakeMessengerRequest[] = []
  const nextMessageId = new Map<number, number>()
  let failure: FakeMessengerFailure = null
  let nextBotId = 7_000_000_000 + Math.floor(Math.random() * 1_000_000)
  let nextChatId = 500_000_000
  let nextUpdateId = 100_000
  const now = () => Math.floor(Date.now() / 1000)
  const messageId = (chatId: number) => {
    const id = (nextMessageId.get(chatId) ?? 0) + 1
    nextMessageId.set(chatId, id)
    return id
  }

  function store(state: BotState, message: FakeMessage): void {
    let chat = state.chats.get(message.chat.id)
    if (!chat) {
      chat = new Map()
      state.chats.set(message.chat.id, chat)
    }
    chat.set(message.message_id, message)
  }

  async function method(
    state: BotState,
    name: string,
    p: Record<string, unknown>,
    res: ServerResponse,
  ): Promise<number> {
    const bot = state.bot
    switch (name) {
      case 'getMe':
        return answer(res, 200, {
          ok: true,
          result: {
            id: bot.id,
            is_bot: true,
            first_name: bot.first_name,
            username: bot.username,
            can_join_groups: true,
            can_read_all_group_messages: false,
            supports_inline_queries: false,
          },
        })
      case 'setWebhook': {
        const url = typeof p.url === 'string' ? p.url : ''
        if (url === '') {
          state.webhook = null
          return answer(res, 200, { ok: true, result: true, description: 'Webhook was deleted' })
        }
        if (!/^https?:\/\//.test(url))
          return fail(res, 400, 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook')
        const secret = p.secret_token
        if (secret !== undefined && (typeof secret !== 'string' || !SECRET_TOKEN.test(secret)))
          return fail(res, 400, 'Bad Request: secret token contains unallowed characters')
        const allowed = Array.isArray(p.allowed_updates)
          ? p.allowed_updates.filter((x): x is string => typeof x === 'string')
          : []
        state.webhook = { url, secret_token: typeof secret === 'string' ? secret : null, allowed_updates: allowed }
        return answer(res, 200, { ok: true, result: true, description: 'Webhook was set' })
      }
      case 'deleteWebhook':
        state.webhook = null
        return answer(res, 200, { ok: true, result: true, description: 'Webhook was deleted' })
      case 'getWebhookInfo':
        return answer(res, 200, {
          ok: true,
          result: {
            url: state.webhook?.url ?? '',
            has_custom_certificate: false,
            pending_update_count: 0,
            allowed_updates: state.webhook?.allowed_updates ?? [],
          },
        })
      case 'sendMessage': {
        const chatId = Number(p.chat_id)
        const text = typeof p.text === 'string' ? p.text : ''
        const chat = state.chats.get(chatId)
        if (!Number.isSafeInteger(chatId) || !chat) return fail(res, 400, 'Bad Request: chat not found')
        if (text.trim() === '') return fail(res, 400, 'Bad Request: message text is empty')
        if (text.length > MAX_TEXT) return fail(res, 400, 'Bad Request: message is too long')
        const rp = (p.reply_parameters && typeof p.reply_parameters === 'object' ? p.reply_parameters : {}) as {
          message_id?: unknown
          allow_sending_without_reply?: unknown
        }
        const replyId = rp.message_id ?? p.reply_to_message_id
        const replyTo = replyId !== undefined ? chat.get(Number(replyId)) : undefined
        if (
          replyId !== undefined &&
          !replyTo &&
          rp.allow_sending_without_reply !== true &&
          p.allow_sending_without_reply !== true
        ) {
          return fail(res, 400, 'Bad Request: message to be replied not found')
        }
        const first = [...chat.values()][0]!
        const message: FakeMessage = {
          message_id: messageId(chatId),
          from: { id: bot.id, is_bot: true, first_name: bot.first_name, username: bot.username },
          chat: first.chat,
          date: now(),
          text,
          ...(replyTo && { reply_to_message: replyTo }),
        }
        store(state, message)
        sent.push({
          bot_id: bot.id,
          chat_id: chatId,
          message_id: message.message_id,
          text,
          reply_to_message_id: replyTo?.message_id ?? null,
        })
        return answer(res, 200, { ok: true, result: message })
      }
      default:
        return fail(res, 404, 'Not Found: method not found')
    }
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake')
    const m = url.pathname.match(/^\/bot([^/]+)\/([A-Za-z]+)$/)
    const entry: FakeMessengerRequest = { method: m?.[2] ?? url.pathname.split('/').pop() ?? '', status: null }
    requests.push(entry)
    if (failure === 'hang') {
      req.resume()
      return
    }
    if (failure) {
      req.resume()
      entry.status = fail(res, failure.status, 'Internal Server Error')
      return
    }
    if (!m) {
      req.resume()
      entry.status = fail(res, 404, 'Not Found')
      return
    }
    const state = bots.get(decodeURIComponent(m[1]!))
    if (!state) {
      req.resume()
      entry.status = fail(res, 401, 'Unauthorized')
      return
    }
    paramsOf(req, url).then(
      async (p) => (entry.status = await method(state, m[2]!, p, res)),
      () => (entry.status = fail(res, 400, "Bad Request: can't parse request parameters")),
    )
  })
  await new Promise<void>((r) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', r))
  const base = `http://${opts.host ?? '127.0.0.1'}:${(server.address() as AddressInfo).port}`

  async function deliver(
    token: string,
    update: FakeDelivery['update'],
    secretToken?: string | null,
  ): Promise<FakeDelivery> {
    const state = bots.get(token)
    if (!state) throw new Error('unknown bot token')
    if (!state.webhook) throw new Error(`bot @${state.bot.username} has no webhook registered`)
    const secret = secretToken === undefined ? state.webhook.secret_token : secretToken
    const res = await fetch(state.webhook.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(secret !== null && { 'x-telegram-bot-api-secret-token': secret }),
      },
      body: JSON.stringify(update),
    })
    return { status: res.status, body: await res.text(), update }
  }

  return {
    url: base,
    sent,
    requests,
    createBot({ username, first_name } = {}) {
      const id = nextBotId++
      const bot: FakeBot = {
        id,
        username: username ?? `berth_${id}_bot`,
        first_name: first_name ?? 'Berth',
        token: `${id}:AA${randomBytes(24).toString('base64url').slice(0, 33)}`,
      }
      bots.set(bot.token, { bot, webhook: null, chats: new Map() })
      return bot
    },
    chat(c = {}) {
      const id = c.id ?? nextChatId++
      const type = c.type ?? 'private'
      return type === 'private'
        ? { id, type, first_name: 'Ada', username: 'ada', ...c }
        : { id, type, title: 'Ops', ...c }
    },
    webhookOf: (token) => bots.get(token)?.webhook ?? null,
    async sendUpdate(token, { chat, text, replyTo }, o = {}) {
      const state = bots.get(token)
      if (!state) throw new Error('unknown bot token')
      const parent = replyTo !== undefined ? state.chats.get(chat.id)?.get(replyTo) : undefined
      if (replyTo !== undefined && !parent) throw new Error(`no message ${replyTo} in chat ${chat.id} to reply to`)
      const message: FakeMessage = {
        message_id: messageId(chat.id),
        from: {
          id: chat.type === 'private' ? chat.id : 42,
          is_bot: false,
          first_name: chat.first_name ?? 'Ada',
          ...(chat.username && { username: chat.username }),
        },
        chat,
        date: now(),
        text,
        ...(parent && { reply_to_message: parent }),
      }
      store(state, message)
      return deliver(token, { update_id: nextUpdateId++, message }, o.secretToken)
    },
    redeliver: (token, update, o = {}) => deliver(token, update, o.secretToken),
    fail(mode) {
      failure = mode
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
