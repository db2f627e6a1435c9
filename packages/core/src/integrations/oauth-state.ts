import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { validationError, randomToken } from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import type { OnceKeys } from '../coordination/port.js'
import type { Cipher } from '../ports/cipher.js'
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'

/** How long an OAuth `state` stays usable (10 minutes). */
export const OAUTH_STATE_TTL_MS = 10 * 60_000

const PREFIX = 'oauth-states:'
const STATE_RE = /^([a-z0-9]{32})\.([a-z0-9]{1,12})\.([A-Za-z0-9_-]{43})$/

/** What a `state` stands for, kept server-side until its one use. */
export interface OAuthStateRecord {
  nonce: string
  /** The caller that started the flow: the one the result is stored for. */
  owner: string
  /** Which flow it belongs to, e.g. `git:github`: a state is only good at its own callback. */
  flow: string
  /** Where the browser goes afterwards (a validated local path). */
  return_path: string
  /** The redirect URI sent to the provider (the code exchange must repeat it). */
  redirect_uri: string
  /** The PKCE code verifier, encrypted; null when the provider has no PKCE. */
  code_verifier_encrypted: string | null
  expires_at: number
}

/** A consumed state: the record with its PKCE verifier decrypted. */
export interface ConsumedState extends Omit<OAuthStateRecord, 'code_verifier_encrypted'> {
  code_verifier: string | null
}

/**
 * The key `state` values are signed with, derived (HKDF-SHA256) from the deployment's
 * encryption key, so no second secret has to be configured and the two uses never share
 * key material.
 *
 * @example
 * ```ts
 * const key = deriveOAuthStateKey(encryptionKey) // 32 bytes
 * ```
 */
export function deriveOAuthStateKey(encryptionKey: Uint8Array): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', encryptionKey, new Uint8Array(0), 'berth oauth state v1', 32))
}

/**
 * A PKCE pair (RFC 7636, method S256): a 43-character verifier and its challenge.
 *
 * @example
 * ```ts
 * const { verifier, challenge } = pkcePair()
 * // send `challenge` (code_challenge_method=S256) to authorize, `verifier` to the token endpoint
 * ```
 */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: pkceChallenge(verifier) }
}

/**
 * The S256 challenge of a PKCE verifier: base64url(SHA-256(verifier)).
 *
 * @example
 * ```ts
 * pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk') // 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'
 * ```
 */
export function pkceChallenge(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url')
}

const badState = (message: string) => validationError([{ location: 'query', path: 'state', message }])

/**
 * OAuth `state` values that are signed, expiring, single-use and bound to the caller, the
 * flow (provider) and the return path.
 *
 * A state is `<nonce>.<expiry>.<signature>`: the signature is an HMAC over the nonce, the
 * expiry and everything the server stored for it (owner, flow, return path, redirect URI),
 * so neither can be swapped. The record lives in the store under the nonce until its one
 * use; consuming removes it, so a replay finds nothing. Every refusal is a 400
 * VALIDATION_FAILED naming `state`. The store has no compare-and-set, so the one use is
 * claimed in the coordination backend's single-use keys (`once`): exact across every
 * instance sharing it, even for two simultaneous callbacks.
 *
 * @example
 * ```ts
 * const states = new OAuthStates(store, clock, cipher, deriveOAuthStateKey(key), OAUTH_STATE_TTL_MS, coordination.once)
 * const { state, codeChallenge } = await states.issue({ owner: caller.id, flow: 'git:github', returnPath: '/settings', redirectUri, pkce: true })
 * // ... later, at the callback:
 * const record = await states.consume(query.state, { flow: 'git:github' }) // 400 when forged, replayed or expired
 * ```
 */
export class OAuthStates {
  private readonly lock = new KeyedMutex()

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cipher: Cipher,
    private readonly key: Uint8Array,
    private readonly ttlMs = OAUTH_STATE_TTL_MS,
    /** Where a state's one use is claimed (without: this process's lock only). */
    private readonly once?: OnceKeys,
  ) {
    if (key.length < 32) throw new Error('the OAuth state key must be at least 32 bytes')
  }

  private sign(
    r: Pick<OAuthStateRecord, 'nonce' | 'expires_at' | 'owner' | 'flow' | 'return_path' | 'redirect_uri'>,
  ): string {
    // Length-prefixed fields: no two different records serialise alike.
    const fields = ['v1', r.nonce, String(r.expires_at), r.owner, r.flow, r.return_path, r.redirect_uri]
    return createHmac('sha256', this.key)
      .update(fields.map((f) => `${f.length}:${f}`).join('|'))
      .digest('base64url')
  }

  private storeKey(nonce: string): string {
    return `${PREFIX}${nonce}`
  }

  /** Start a flow: store the record and return the `state` (and PKCE challenge) for the authorize URL. */
  async issue(input: {
    owner: string
    flow: string
    returnPath: string
    redirectUri: string
    pkce: boolean
  }): Promise<{ state: string; codeChallenge: string | null }> {
    await this.sweep()
    const nonce = randomToken(32)
    const pair = input.pkce ? pkcePair() : null
    const record: OAuthStateRecord = {
      nonce,
      owner: input.owner,
      flow: input.flow,
      return_path: input.returnPath,
      redirect_uri: input.redirectUri,
      code_verifier_encrypted: pair ? this.cipher.encrypt(pair.verifier) : null,
      expires_at: this.clock.now() + this.ttlMs,
    }
    await this.store.set(this.storeKey(nonce), record)
    return {
      state: `${nonce}.${record.expires_at.toString(36)}.${this.sign(record)}`,
      codeChallenge: pair?.challenge ?? null,
    }
  }

  /**
   * Check and use up a state presented at a callback. Refused (400 naming `state`, the
   * record left alone): malformed, unknown or already used, a signature that does not
   * match, another flow's state, or — when the callback request itself carries a caller's
   * credentials — another caller's state. An expired state is used up and refused.
   */
  async consume(state: string, expect: { flow: string; caller?: string | null }): Promise<ConsumedState> {
    const m = STATE_RE.exec(state)
    if (!m) throw badState('state is malformed')
    const [, nonce, exp, sig] = m as unknown as [string, string, string, string]
    return this.lock.run(nonce, async () => {
      const record = await this.store.get<OAuthStateRecord>(this.storeKey(nonce))
      if (!record) throw badState('state is unknown, expired or already used')
      const expected = Buffer.from(this.sign(record))
      const given = Buffer.from(sig)
      if (
        record.expires_at.toString(36) !== exp ||
        given.length !== expected.length ||
        !timingSafeEqual(given, expected)
      ) {
        throw badState('state signature does not match')
      }
      if (record.flow !== expect.flow) throw badState('state was issued for another provider')
      if (expect.caller && expect.caller !== record.owner) throw badState('state was issued to another caller')
      // Another instance may be consuming it right now: one claim wins, the other is a replay.
      if (this.once && !(await this.once.claimOnce(`oauth-state:${nonce}`, this.ttlMs)))
        throw badState('state is unknown, expired or already used')
      await this.store.remove(this.storeKey(nonce))
      if (record.expires_at <= this.clock.now()) throw badState('state has expired')
      const { code_verifier_encrypted, ...rest } = record
      return { ...rest, code_verifier: code_verifier_encrypted ? this.cipher.decrypt(code_verifier_encrypted) : null }
    })
  }

  /** Drop expired states nobody came back with. */
  private async sweep(): Promise<void> {
    const keys = await this.store.keys(PREFIX)
    if (keys.length < 50) return
    const now = this.clock.now()
    const records = await this.store.getMany<OAuthStateRecord>(keys)
    await Promise.all(keys.filter((_, i) => (records[i]?.expires_at ?? 0) <= now).map((k) => this.store.remove(k)))
  }
}
