/** OAuth `state` values and return paths: the properties the callbacks rely on. */
import { randomBytes } from 'node:crypto'
import { createStorage } from 'unstorage'
import { describe, expect, it } from 'vitest'
import { createAesGcmCipher, deriveOAuthStateKey, isApiError, manualClock } from '@berth/core'
import { OAuthStates, pkceChallenge, pkcePair, type OAuthStateRecord } from '../src/integrations/oauth-state.js'
import { isLocalReturnPath, withResult } from '@berth/contract'
import { unstorageStore } from '../../server/src/store.js'

function setup() {
  const store = unstorageStore(createStorage())
  const clock = manualClock(1_000_000)
  const key = randomBytes(32)
  const states = new OAuthStates(store, clock, createAesGcmCipher(randomBytes(32)), deriveOAuthStateKey(key))
  const issue = (over: Partial<{ owner: string; flow: string; returnPath: string }> = {}) =>
    states.issue({
      owner: 'usr_alice',
      flow: 'git:github',
      returnPath: '/settings',
      redirectUri: 'https://b.example/cb',
      pkce: true,
      ...over,
    })
  return { store, clock, key, states, issue }
}

async function refused(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  )
  expect(isApiError(err) && err.code === 'VALIDATION_FAILED').toBe(true)
  const issue = (err as { details: { issues: { path: string; message: string }[] } }).details.issues[0]!
  expect(issue.path).toBe('state')
  return issue.message
}

describe('OAuth state', () => {
  it('round-trips once with the PKCE verifier whose challenge went out', async () => {
    const { states, issue } = setup()
    const { state, codeChallenge } = await issue()
    const got = await states.consume(state, { flow: 'git:github' })
    expect(got).toMatchObject({ owner: 'usr_alice', return_path: '/settings', redirect_uri: 'https://b.example/cb' })
    expect(pkceChallenge(got.code_verifier!)).toBe(codeChallenge)
    expect(await refused(states.consume(state, { flow: 'git:github' }))).toMatch(/already used/)
  })

  it('detects a stored record changed behind its back (owner or return path swapped)', async () => {
    const { states, store, issue } = setup()
    for (const change of [{ owner: 'usr_mallory' }, { return_path: '/elsewhere' }, { flow: 'git:gitlab' }]) {
      const { state } = await issue()
      const key = `oauth-states:${state.split('.')[0]}`
      await store.set(key, { ...(await store.get<OAuthStateRecord>(key))!, ...change })
      expect(await refused(states.consume(state, { flow: change.flow ?? 'git:github' }))).toMatch(/signature/)
    }
  })

  it('a state signed with another deployment key is refused', async () => {
    const a = setup()
    const b = setup()
    const { state } = await a.issue()
    // Same nonce record copied over: only the key differs.
    const key = `oauth-states:${state.split('.')[0]}`
    await b.store.set(key, await a.store.get(key))
    expect(await refused(b.states.consume(state, { flow: 'git:github' }))).toMatch(/signature/)
  })

  it('expires after ten minutes, and is used up by the late attempt', async () => {
    const { states, clock, issue } = setup()
    const fresh = await issue()
    clock.advance(10 * 60_000 - 1)
    await states.consume(fresh.state, { flow: 'git:github' })
    const late = await issue()
    clock.advance(10 * 60_000)
    expect(await refused(states.consume(late.state, { flow: 'git:github' }))).toMatch(/expired/)
    expect(await refused(states.consume(late.state, { flow: 'git:github' }))).toMatch(/already used/)
  })

  it('is single-use under concurrent callbacks', async () => {
    const { states, issue } = setup()
    const { state } = await issue()
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => states.consume(state, { flow: 'git:github' })),
    )
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
  })

  it('without PKCE carries no verifier; PKCE pairs are S256', async () => {
    const { states } = setup()
    const { state, codeChallenge } = await states.issue({
      owner: 'u',
      flow: 'f',
      returnPath: '/',
      redirectUri: 'x',
      pkce: false,
    })
    expect(codeChallenge).toBeNull()
    expect((await states.consume(state, { flow: 'f' })).code_verifier).toBeNull()
    const { verifier, challenge } = pkcePair()
    expect(verifier).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(challenge).toBe(pkceChallenge(verifier))
    // RFC 7636, appendix B.
    expect(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).toBe(
      'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    )
  })
})

describe('return paths', () => {
  it('accepts local paths and refuses everything a browser could take elsewhere', () => {
    for (const ok of ['/', '/settings', '/a/b?c=d#e', '/%2F%2Fevil.com', '/javascript:alert(1)'])
      expect(isLocalReturnPath(ok), ok).toBe(true)
    for (const bad of [
      '',
      'settings',
      '//evil.com',
      '///evil.com',
      '/\\evil.com',
      '\\\\evil.com',
      'https://evil.com',
      'javascript:alert(1)',
      '/\t/evil.com',
      '/\n/evil.com',
      '/\r\nLocation: x',
      '/.//evil.com',
      '/a//b',
      '/ok?next=//evil.com',
      '/\u2028x',
      '/ x',
      `/${'a'.repeat(2000)}`,
    ]) {
      expect(isLocalReturnPath(bad), JSON.stringify(bad)).toBe(false)
    }
  })

  it('adds result flags without losing the query or fragment', () => {
    expect(withResult('/settings?tab=git#top', { git: 'connected', account: 'git_1' })).toBe(
      '/settings?tab=git&git=connected&account=git_1#top',
    )
    expect(withResult('/', { git: 'error', reason: 'access_denied' })).toBe('/?git=error&reason=access_denied')
  })
})
