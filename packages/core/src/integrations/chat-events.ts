import { createHmac, timingSafeEqual } from 'node:crypto'
import { readJsonBytes } from '../internal/input.js'
import { ApiError, validationError, ChatEvent, type ChatEventAck } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { ChatMailConnectService } from './chat-mail-connect.js'
import { OwnedCollection, paginate, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { listOrder } from '../records/indexes.js'
import { toView } from '../records/view.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'

/** How far a request's timestamp may be from the server's clock (5 minutes), in seconds. */
export const CHAT_EVENT_WINDOW_SECONDS = 5 * 60

/** Events kept per integration; older ones go as new ones arrive. */
const KEEP = 100
const EVENT_ID_RE = /^[A-Za-z0-9_-]{1,64}$/

/** A stored chat event. `order` sorts events received within the same clock tick. */
export interface ChatEventRecord extends OwnedRecord, ChatEvent {
  order: number
}

export interface ChatEventsOptions {
  store: Store
  clock: Clock
  logger: Logger
  integrations: IntegrationsService
  connect: ChatMailConnectService
  /** The chat provider app's signing secret (deployment config); without it every event is refused. */
  signingSecret?: string | undefined
  /** Largest event body in bytes (default 256 KiB). */
  bodyLimit?: number
}

let sequence = 0
function nextOrder(): number {
  sequence = (sequence + 1) % 1000
  return Date.now() * 1000 + sequence
}

/**
 * The chat provider's request signature over the raw body:
 * `v0=<hex HMAC-SHA256(signing_secret, "v0:<timestamp>:<body>")>`.
 *
 * @example
 * ```ts
 * chatRequestSignature('8f2c…', '1767225600', Buffer.from('{"type":"url_verification"}')) // 'v0=5d1e…'
 * ```
 */
export function chatRequestSignature(secret: string, timestamp: string, body: Uint8Array): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:`, 'utf8').update(body).digest('hex')}`
}

/**
 * Whether `signature` is the request's signature, compared in constant time.
 *
 * @example
 * ```ts
 * verifyChatSignature(secret, headers['x-request-timestamp'], rawBody, headers['x-signature']) // true | false
 * ```
 */
export function verifyChatSignature(secret: string, timestamp: string, body: Uint8Array, signature: string): boolean {
  const expected = Buffer.from(chatRequestSignature(secret, timestamp, body))
  const given = Buffer.from(signature)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const isObject = (x: unknown): x is Record<string, unknown> => x !== null && typeof x === 'object' && !Array.isArray(x)
const text = (x: unknown, max: number): string | null => (typeof x === 'string' ? x.slice(0, max) : null)

function eventTime(x: unknown): string | null {
  if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0 || x > 1e11) return null
  return new Date(Math.floor(x) * 1000).toISOString()
}

/**
 * `POST /api/chatprovider/events`: requests from the chat provider, verified before
 * anything is read from them (signature over the raw body with the deployment's signing
 * secret, timestamp within 5 minutes, constant-time compare; any failure is a 401 and
 * nothing is done). A `url_verification` is answered with its challenge; an
 * `event_callback` is recorded once (by `event_id`: the provider retries) for every chat
 * integration connected to that workspace, where `GET /v1/integrations/:id/events` shows
 * it. Events start nothing: they are recorded, and acknowledged so the provider does not
 * retry.
 *
 * @example
 * ```ts
 * const events = new ChatEventsService({ store, clock, logger, integrations, connect, signingSecret })
 * const ack = await events.receive(request) // { challenge } or { ok: true, recorded }
 * ```
 */
export class ChatEventsService {
  private readonly bodyLimit: number

  constructor(private readonly o: ChatEventsOptions) {
    this.bodyLimit = o.bodyLimit ?? 256 * 1024
    o.integrations.onRemove((r) => (r.type === 'chatprovider' ? this.clear(r.owner_id, r.id) : Promise.resolve()))
  }

  private collection(integrationId: string): OwnedCollection<ChatEventRecord> {
    return new OwnedCollection<ChatEventRecord>(this.o.store, `chatprovider-events:${integrationId}`, 'chat event')
  }

  view(r: ChatEventRecord): ChatEvent {
    return toView(ChatEvent, r)
  }

  /** Verify and handle one request from the provider. */
  async receive(request: Request): Promise<ChatEventAck> {
    const refuse = (why: string) => new ApiError('UNAUTHORIZED', `Chat provider request refused: ${why}`)
    const secret = this.o.signingSecret
    if (!secret) throw refuse('this server has no chat provider signing secret configured')
    const timestamp = request.headers.get('x-request-timestamp')
    const signature = request.headers.get('x-signature')
    if (!timestamp || !signature) throw refuse('the X-Signature and X-Request-Timestamp headers are required')
    if (
      !/^\d{1,12}$/.test(timestamp) ||
      Math.abs(this.o.clock.now() / 1000 - Number(timestamp)) > CHAT_EVENT_WINDOW_SECONDS
    ) {
      throw refuse('X-Request-Timestamp is not within 5 minutes of the server time')
    }
    const raw = await readJsonBytes(request, this.bodyLimit)
    if (!verifyChatSignature(secret, timestamp, raw, signature)) throw refuse('the signature does not match')
    let body: unknown
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch {
      throw validationError([{ location: 'body', path: '', message: 'expected a JSON object' }])
    }
    if (!isObject(body)) throw validationError([{ location: 'body', path: '', message: 'expected a JSON object' }])
    if (body.type === 'url_verification') {
      if (typeof body.challenge !== 'string' || body.challenge.length > 1000)
        throw validationError([{ location: 'body', path: 'challenge', message: 'must be a string' }])
      return { challenge: body.challenge }
    }
    if (body.type !== 'event_callback') return { ok: true, recorded: 0 }
    return { ok: true, recorded: await this.record(body) }
  }

  /** Record an `event_callback` for every integration of its workspace; how many recorded it (retries: none). */
  private async record(body: Record<string, unknown>): Promise<number> {
    const eventId = typeof body.event_id === 'string' && EVENT_ID_RE.test(body.event_id) ? body.event_id : null
    if (!eventId || typeof body.team_id !== 'string') return 0
    const ev = isObject(body.event) ? body.event : {}
    const integrations = await this.o.connect.chatIntegrationsOfTeam(body.team_id)
    if (integrations.length === 0)
      this.o.logger.info('chat event for a workspace no integration is connected to', {
        team: body.team_id.slice(0, 64),
      })
    let recorded = 0
    for (const r of integrations) if (await this.recordFor(r, eventId, ev, body.event_time)) recorded++
    return recorded
  }

  private async recordFor(
    r: IntegrationRecord,
    eventId: string,
    ev: Record<string, unknown>,
    time: unknown,
  ): Promise<boolean> {
    const collection = this.collection(r.id)
    if (await collection.find(r.owner_id, eventId)) return false
    const body = text(ev.text, 4000)
    const bot = typeof r.config.bot_user_id === 'string' ? r.config.bot_user_id : null
    const now = isoNow(this.o.clock)
    await collection.put({
      id: eventId,
      owner_id: r.owner_id,
      event_id: eventId,
      type: text(ev.type, 100) ?? 'unknown',
      subtype: text(ev.subtype, 100),
      channel: text(ev.channel, 100),
      user: text(ev.user, 100),
      text: body,
      mentions_bot: ev.type === 'app_mention' || (bot !== null && body?.includes(`<@${bot}>`) === true),
      event_time: eventTime(time),
      received_at: now,
      created_at: now,
      updated_at: now,
      order: nextOrder(),
    })
    const all = await this.sorted(r.owner_id, r.id)
    for (const old of all.slice(KEEP)) await collection.remove(r.owner_id, old.id).catch(() => {})
    return true
  }

  private async sorted(owner: string, integrationId: string): Promise<ChatEventRecord[]> {
    return this.collection(integrationId).all(owner)
  }

  /** The events recorded for an integration, newest first. */
  async list(owner: string, integrationId: string, page: Page): Promise<Paged<ChatEvent>> {
    const all = await this.sorted(owner, integrationId)
    const paged = paginate(all, page, (r) => listOrder('chatprovider-events', r))
    return { ...paged, items: paged.items.map((r) => this.view(r)) }
  }

  /** Drop every event of an integration (it was deleted). */
  async clear(owner: string, integrationId: string): Promise<void> {
    for (const key of await this.o.store.keys(`chatprovider-events:${integrationId}:${owner}:`))
      await this.o.store.remove(key)
  }
}
