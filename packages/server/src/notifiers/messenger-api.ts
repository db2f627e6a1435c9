import { ProviderError, type MessengerApi, type MessengerBotUser } from '@berth/core'

/** The messenger's Bot API (`createBerth({ messenger })`). */
export interface MessengerApiOptions {
  /** API base URL (default `https://api.telegram.org`); methods are called at `<base>/bot<token>/<method>`. */
  apiBaseUrl?: string
  /** Per request (default 10 s). */
  timeoutMs?: number
  fetch?: typeof fetch
}

/** The Bot API's answer: `{ ok: true, result }` or `{ ok: false, error_code, description }`. */
interface Answer {
  ok?: unknown
  result?: unknown
  error_code?: unknown
  description?: unknown
}

/**
 * Core's `MessengerApi` over `fetch`, the way Telegram's Bot API is called: `POST
 * <base>/bot<token>/<method>` with a JSON body. A refused token (`error_code` 401, or 404
 * for a malformed one) is `unauthorized`; 429, 5xx, timeouts, connection errors and
 * unreadable answers `unavailable`; other refusals `rejected`, with the provider's
 * `description`. The token never appears in an error message.
 *
 * @example
 * ```ts
 * const api = createMessengerApi({ apiBaseUrl: 'https://api.telegram.org' })
 * const bot = await api.getMe(botToken) // { id, username, first_name }
 * ```
 */
export function createMessengerApi(opts: MessengerApiOptions = {}): MessengerApi {
  const base = (opts.apiBaseUrl ?? 'https://api.telegram.org').replace(/\/+$/, '')
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doFetch = opts.fetch ?? fetch
  const host = new URL(base).host

  async function call(token: string, method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    // A token is `<digits>:<secret>`; anything that could leave the path is refused before a request is made.
    if (!/^[\w:-]{1,200}$/.test(token))
      throw new ProviderError('messenger', 'unauthorized', 'Not Found: malformed bot token', { status: 404 })
    const scrub = (s: string) => s.split(token).join('<token>')
    let res: Response
    try {
      res = await doFetch(`${base}/bot${token}/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(params),
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } }
      const why =
        e.name === 'TimeoutError'
          ? `did not answer within ${timeoutMs} ms`
          : `could not be reached (${scrub(e.cause?.code ?? e.message)})`
      throw new ProviderError('messenger', 'unavailable', `${host} ${why} (${method})`)
    }
    const text = await res.text().catch(() => '')
    let body: Answer | null = null
    try {
      const parsed: unknown = JSON.parse(text)
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Answer
    } catch {
      // Not JSON: judged below.
    }
    if (body?.ok === true) return body.result
    const code = typeof body?.error_code === 'number' ? body.error_code : res.status
    const description = scrub(
      typeof body?.description === 'string' ? body.description.slice(0, 300) : `${method} answered ${res.status}`,
    )
    if (!body || typeof body.ok !== 'boolean')
      throw new ProviderError('messenger', 'unavailable', `${method}: ${description}`, { status: res.status })
    if (code === 401 || code === 404)
      throw new ProviderError('messenger', 'unauthorized', description, { status: code })
    if (code === 429 || code >= 500) throw new ProviderError('messenger', 'unavailable', description, { status: code })
    throw new ProviderError('messenger', 'rejected', description, { status: code })
  }

  const unusable = (method: string) =>
    new ProviderError('messenger', 'unavailable', `${method} answered something unusable`)

  return {
    async getMe(token) {
      const r = (await call(token, 'getMe')) as Partial<MessengerBotUser> | null
      if (!r || typeof r.id !== 'number' || typeof r.username !== 'string') throw unusable('getMe')
      return {
        id: r.id,
        username: r.username,
        first_name: typeof r.first_name === 'string' ? r.first_name : r.username,
      }
    },
    async setWebhook(token, webhook) {
      await call(token, 'setWebhook', {
        url: webhook.url,
        secret_token: webhook.secret_token,
        allowed_updates: webhook.allowed_updates,
        max_connections: 10,
      })
    },
    async deleteWebhook(token) {
      await call(token, 'deleteWebhook', { drop_pending_updates: false })
    },
    async sendMessage(token, message) {
      const r = (await call(token, 'sendMessage', {
        chat_id: message.chat_id,
        text: message.text,
        reply_parameters:
          message.reply_to_message_id === undefined
            ? undefined
            : { message_id: message.reply_to_message_id, allow_sending_without_reply: true },
      })) as { message_id?: unknown } | null
      if (!r || typeof r.message_id !== 'number') throw unusable('sendMessage')
      return { message_id: r.message_id }
    },
  }
}
