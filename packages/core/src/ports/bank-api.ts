/**
 * The banking-data provider port (Teller-like): what Berth needs from the provider's API
 * to verify a connect-widget enrollment. The server implements it with `fetch` against a
 * configurable base URL; tests point it at the fake in `@berth/testkit/providers`.
 */

/** One account of an enrollment, as the provider lists it (`GET /accounts`). */
export interface BankAccount {
  id: string
  enrollment_id: string
  institution: { id: string; name: string }
  name: string
  /** E.g. `depository`, `credit`. */
  type: string
  /** E.g. `checking`, `savings`, `credit_card`. */
  subtype: string
  currency: string
  last_four: string
  /** `open` or `closed`. */
  status: string
}

/**
 * Why a provider call failed:
 * - `unauthorized`: the access token is missing, invalid or revoked (401/403);
 * - `unavailable`: the provider could not be reached, timed out, or answered 5xx or something unusable;
 * - `rejected`: any other refusal (another 4xx).
 */
export type BankApiErrorKind = 'unauthorized' | 'unavailable' | 'rejected'

/**
 * A failed banking-provider call: `status` is the provider's HTTP status (null when it did
 * not answer), `code` its own error code (`{ error: { code } }`), when it sent one.
 *
 * @example
 * ```ts
 * throw new BankApiError('unauthorized', 'the access token was refused', { status: 403, code: 'forbidden' })
 * ```
 */
export class BankApiError extends Error {
  readonly kind: BankApiErrorKind
  readonly status: number | null
  readonly code: string | null

  constructor(kind: BankApiErrorKind, message: string, extra: { status?: number | null; code?: string | null } = {}) {
    super(message)
    this.name = 'BankApiError'
    this.kind = kind
    this.status = extra.status ?? null
    this.code = extra.code ?? null
  }
}

/**
 * True for a {@link BankApiError} (also across module copies).
 *
 * @example
 * ```ts
 * try { await api.listAccounts(token) } catch (err) { if (isBankApiError(err) && err.kind === 'unauthorized') reconnect() }
 * ```
 */
export function isBankApiError(value: unknown): value is BankApiError {
  return value instanceof BankApiError || (typeof value === 'object' && value !== null && (value as { name?: unknown }).name === 'BankApiError')
}

/** The provider's API, authenticated per call by an enrollment's access token. */
export interface BankApi {
  /** The enrollment's accounts. Throws {@link BankApiError}. */
  listAccounts(accessToken: string): Promise<BankAccount[]>
}

/**
 * The banking API of a deployment that configured none: every call fails, untried.
 *
 * @example
 * ```ts
 * createServices({ store, cipher, bankApi: unconfiguredBankApi })
 * ```
 */
export const unconfiguredBankApi: BankApi = {
  listAccounts: async () => {
    throw new BankApiError('unavailable', 'this server has no banking-data provider configured')
  },
}
