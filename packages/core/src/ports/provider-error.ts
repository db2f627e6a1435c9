// The one error every third-party provider port throws (OAuth and the Git, chat and mail
// APIs behind it, the banking-data API, the messenger's Bot API).

/**
 * Why a provider call failed, per provider API:
 * - `unauthorized`: the token was refused (OAuth: an API call's access token, 401; bank: the
 *   enrollment's access token, 401/403; messenger: the bot token, 401 or 404);
 * - `unavailable`: the provider could not be reached, timed out, or answered 5xx (or 429 for
 *   the messenger) or something unusable;
 * - `rejected` (bank, messenger): the provider refused the request itself (another 4xx);
 * - `invalid_grant` (OAuth): the code or refresh token is invalid, expired or revoked (the
 *   user has to authorize again);
 * - `client` (OAuth): the provider refused Berth's client credentials or request (a
 *   deployment misconfiguration).
 */
export interface ProviderErrorKinds {
  oauth: 'invalid_grant' | 'unauthorized' | 'client' | 'unavailable'
  bank: 'unauthorized' | 'unavailable' | 'rejected'
  messenger: 'unauthorized' | 'unavailable' | 'rejected'
}

/** Which provider API failed: `oauth` (an OAuth provider, with its Git, chat or mail API), `bank` or `messenger`. */
export type ProviderApi = keyof ProviderErrorKinds

/** What the provider said, when it answered: its HTTP (or Bot API) status and its own error code. */
export interface ProviderErrorDetail {
  status?: number | null | undefined
  code?: string | null | undefined
}

/**
 * A failed provider call. `status` is the provider's status (null when it did not answer),
 * `code` its own error code (e.g. `bad_verification_code`) when it sent one: for logs,
 * never shown to callers verbatim.
 *
 * @example
 * ```ts
 * throw new ProviderError('oauth', 'invalid_grant', 'refresh token revoked', { code: 'invalid_grant', status: 400 })
 * throw new ProviderError('bank', 'unauthorized', 'the access token was refused', { status: 403 })
 * ```
 */
export class ProviderError<P extends ProviderApi = ProviderApi> extends Error {
  readonly provider: P
  readonly kind: ProviderErrorKinds[P]
  readonly status: number | null
  readonly code: string | null

  constructor(provider: P, kind: ProviderErrorKinds[P], message: string, detail: ProviderErrorDetail = {}) {
    super(message)
    this.name = 'ProviderError'
    this.provider = provider
    this.kind = kind
    this.status = detail.status ?? null
    this.code = detail.code ?? null
  }
}

/**
 * True for a {@link ProviderError} (of `provider`'s API when given), also across module copies.
 *
 * @example
 * ```ts
 * try { await client.refresh(rt) } catch (err) { if (isProviderError(err, 'oauth') && err.kind === 'invalid_grant') markNeedsReconnect() }
 * ```
 */
export function isProviderError<P extends ProviderApi = ProviderApi>(
  value: unknown,
  provider?: P,
): value is ProviderError<P> {
  if (
    !(value instanceof ProviderError) &&
    !(typeof value === 'object' && value !== null && (value as { name?: unknown }).name === 'ProviderError')
  )
    return false
  return provider === undefined || (value as { provider?: unknown }).provider === provider
}
