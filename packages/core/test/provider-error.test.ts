// One error class for every provider port (OAuth, banking, messenger).
import { describe, expect, it } from 'vitest'
import { ProviderError, isProviderError } from '../src/index.js'
import { unconfiguredBankApi } from '../src/ports/bank-api.js'
import { unconfiguredMessengerApi } from '../src/ports/messenger-api.js'

describe('ProviderError', () => {
  it('carries the provider API, kind, status and code (null when not sent)', () => {
    const err = new ProviderError('bank', 'unauthorized', 'refused', { status: 403, code: 'forbidden' })
    expect(err).toBeInstanceOf(Error)
    expect(err).toMatchObject({
      name: 'ProviderError',
      provider: 'bank',
      kind: 'unauthorized',
      status: 403,
      code: 'forbidden',
      message: 'refused',
    })
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
    await expect(unconfiguredBankApi.listAccounts('t')).rejects.toMatchObject({
      name: 'ProviderError',
      provider: 'bank',
      kind: 'unavailable',
    })
    await expect(unconfiguredMessengerApi.getMe('t')).rejects.toMatchObject({
      name: 'ProviderError',
      provider: 'messenger',
      kind: 'unavailable',
    })
  })
})
