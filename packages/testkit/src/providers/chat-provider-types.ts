/** The shapes of the fake chat provider (`startFakeChatProvider`): teams, channels, messages, the config it hands Berth, its handle. */
/** The workspace the fake chat provider's app is installed into. */
export interface FakeChatTeam {
  id: string
  name: string
}

/** A channel of the fake workspace. */
export interface FakeChatChannel {
  id: string
  name: string
}

/** Options of `startFakeChatProvider`. */
export interface FakeChatProviderOptions {
  clientId?: string
  clientSecret?: string
  /** The app's signing secret (events are signed with it; default: random). */
  signingSecret?: string
  /** Default `{ id: 'T0ACME', name: 'Acme' }`. */
  team?: FakeChatTeam
  /** The app's bot user (default `U0BERTHBOT`). */
  botUserId?: string
  /** Default: `#general` (`C0GENERAL`) and `#alerts` (`C0ALERTS`). */
  channels?: FakeChatChannel[]
  /** The provider's clock in ms (default `Date.now`): share a manual clock to expire tokens on demand. */
  now?: () => number
  /**
   * Token rotation (default on): access tokens expire after `accessTokenTtlSeconds` and come
   * with a refresh token that rotates on every use. Off: one token that never expires.
   */
  rotateTokens?: boolean
  /** Access-token lifetime with rotation (default 12 h, like Slack). */
  accessTokenTtlSeconds?: number
  host?: string
  port?: number
}

/** What `createBerth({ chatProvider })` needs to talk to the fake. */
export interface FakeChatProviderConfig {
  clientId: string
  clientSecret: string
  signingSecret: string
  authorizeUrl: string
  tokenUrl: string
  apiBaseUrl: string
}

/** One request the fake answered (token values are not kept). */
export interface FakeChatRequest {
  method: string
  path: string
  /** Token endpoint: the grant type. */
  grant_type?: string
  /** The provider's `error` when it answered `{ ok: false }`. */
  error?: string
  status: number
}

/** A message `chat.postMessage` accepted. */
export interface FakeChatMessage {
  /** The channel's id (names are resolved). */
  channel: string
  text: string
  blocks: unknown[] | null
  thread_ts: string | null
  ts: string
  team_id: string
}

/** Options of {@link FakeChatProvider.sendEvent}. */
export interface SendChatEventOptions {
  /** Unix seconds of `X-Request-Timestamp` (default: the provider's clock). */
  timestamp?: number
  /** Sign with another secret (a forgery). */
  secret?: string
  /** Send this `X-Signature` instead of the right one. */
  signature?: string
  /** Leave these headers out. */
  omit?: ('x-signature' | 'x-request-timestamp')[]
}

/** A running fake chat-workspace provider. */
export interface FakeChatProvider {
  url: string
  clientId: string
  clientSecret: string
  signingSecret: string
  team: FakeChatTeam
  botUserId: string
  config(): FakeChatProviderConfig
  requests: FakeChatRequest[]
  /** Every posted message, oldest first. */
  messages: FakeChatMessage[]
  issuedTokens(): string[]
  activeGrants(): number
  /** The workspace removes the app: every grant ends; API calls answer `token_revoked`. */
  revokeAll(): void
  /** The next consent is declined (`error=access_denied`). */
  declineNext(): void
  /** The next `chat.postMessage` answers `{ ok: false, error }`. */
  failNext(error: string): void
  /** An `event_callback` envelope with an `app_mention` of the bot (or a plain `message` with `mention: false`). */
  messageEvent(
    text: string,
    opts?: { channel?: string; user?: string; mention?: boolean; eventId?: string },
  ): Record<string, unknown>
  /** A `url_verification` request. */
  urlVerification(challenge?: string): Record<string, unknown>
  /** The provider's signature headers for a body. */
  signatureHeaders(
    body: string,
    timestamp?: number,
    secret?: string,
  ): { 'x-request-timestamp': string; 'x-signature': string }
  /** POST a payload to an events URL the way the provider does (signed). */
  sendEvent(url: string, payload: unknown, opts?: SendChatEventOptions): Promise<Response>
  close(): Promise<void>
}
