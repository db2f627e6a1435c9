// One error class for every provider port; the old names still construct and match it.
import { describe, expect, it } from 'vitest'
import {
  BankApiError,
  MessengerApiError,
  OAuthError,
  ProviderError,
  isBankApiError,
  isMessengerApiError,
  isOAuthError,
  isProviderError,
  unconfiguredBankApi,
  unconfiguredMessengerApi,
} from '../src/index.js'

describe('ProviderError', () => {
  it('carries the provider API, kind, status and code (null when not sent)', () => {
    const err = new ProviderError('bank', 'unauthorized', 'refused', { status: 403, code: 'forbidden' })
    expect(err).toBeInstanceOf(Error)
    expect(err).toMatchObject({ name: 'ProviderError', provider: 'bank', kind: 'unauthorized', status: 403, code: 'forbidden', message: 'refused' })
    expect(new ProviderError('oauth', 'unavailable', 'down')).toMatchObject({ status: null, code: null })
  })

  it('isProviderError tells the provider APIs apart, also for a copy from another module', () => {
    const oauth = new ProviderError('oauth', 'invalid_grant', 'revoked')
    expect(isProviderError(oauth)).toBe(true)
    expect(isProviderError(oauth, 'oauth')).toBe(true)
    expect(isProviderError(oauth, 'bank')).toBe(false)
    const copy = Object.assign(new Error('x'), { name: 'ProviderError', provider: 'messenger', kind: 'rejected' })
    expect(isProviderError(copy, 'messenger')).toBe(true)
    expect(isProviderError(copy, 'oauth')).toBe(false)
    expect(isProviderError(new Error('plain'))).toBe(false)
    expect(isProviderError(null)).toBe(false)
  })

  it('the unconfigured ports throw it', async () => {
    await expect(unconfiguredBankApi.listAccounts('t')).rejects.toMatchObject({ name: 'ProviderError', provider: 'bank', kind: 'unavailable' })
    await expect(unconfiguredMessengerApi.getMe('t')).rejects.toMatchObject({ name: 'ProviderError', provider: 'messenger', kind: 'unavailable' })
  })

  it('the deprecated names build it and match every error of their provider', () => {
    const old = new OAuthError('client', 'bad client', { status: 401 })
    expect(old).toBeInstanceOf(ProviderError)
    expect(old).toMatchObject({ provider: 'oauth', kind: 'client', status: 401, code: null })
    const fresh = new ProviderError('oauth', 'unauthorized', 'refused')
    expect(fresh instanceof OAuthError).toBe(true)
    expect(fresh instanceof BankApiError).toBe(false)
    expect(isOAuthError(fresh)).toBe(true)
    const bank = new BankApiError('rejected', 'no')
    expect(isBankApiError(bank) && bank.provider).toBe('bank')
    expect(isMessengerApiError(bank)).toBe(false)
    expect(new ProviderError('messenger', 'rejected', 'chat not found') instanceof MessengerApiError).toBe(true)
  })
})
