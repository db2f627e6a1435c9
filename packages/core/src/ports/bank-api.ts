/**
 * The banking-data provider port (Teller-like): what Berth needs from the provider's API
 * to verify a connect-widget enrollment. The server implements it with `fetch` against a
 * configurable base URL; tests point it at the fake in `@berth/testkit/providers`.
 */

import { ProviderError, type ProviderErrorKinds } from './provider-error.js'

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

/** Why a banking-provider call failed: see {@link ProviderErrorKinds}. */
export type BankApiErrorKind = ProviderErrorKinds['bank']

/** The provider's API, authenticated per call by an enrollment's access token. */
export interface BankApi {
  /** The enrollment's accounts. Throws {@link ProviderError}. */
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
    throw new ProviderError('bank', 'unavailable', 'this server has no banking-data provider configured')
  },
}
