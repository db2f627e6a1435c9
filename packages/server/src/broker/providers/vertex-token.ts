/**
 * Access tokens for Vertex AI, minted from a service account's key with the OAuth 2.0
 * JWT-bearer grant (RFC 7523), as Google's libraries do: an assertion signed with the
 * key (RS256, by `jose`) is posted to the key's `token_uri`, which answers a bearer token
 * for about an hour. Tokens are kept per key and minted again five minutes before they
 * expire, or at once when Vertex refuses one. They never leave the gateway.
 */
import { createHash, createPrivateKey } from 'node:crypto'
import { SignJWT } from 'jose'
import type { ServiceAccountKey } from '@berth/core'

/** What the token lets the gateway do: Vertex AI's scope. */
const SCOPE = 'https://www.googleapis.com/auth/cloud-platform'
const GOOGLE_TOKEN_URI = 'https://oauth2.googleapis.com/token'
const GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
/** A token this close to its expiry is minted again. */
const EARLY_MS = 5 * 60_000
/** Keys remembered at most (a rotated key is a new entry). */
const MAX_KEYS = 1000
/** A token endpoint slower than this is given up on. */
const MINT_TIMEOUT_MS = 30_000

/** The token endpoint refused the key's assertion (a wrong or revoked key, a disabled account). */
export class TokenRefused extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`token endpoint answered ${status}: ${detail}`)
  }
}

interface Minted {
  token: string
  expiresAt: number
}

/** Access tokens per service account key, minted on demand and kept until shortly before they expire. */
export interface AccessTokens {
  /** A valid token for the key: a kept one, or one minted now ({@link TokenRefused} when the endpoint says no). */
  get(key: ServiceAccountKey, fetch: typeof globalThis.fetch): Promise<string>
  /** Forget `token` (Vertex refused it): the next `get` mints another. */
  drop(key: ServiceAccountKey, token: string): void
}

async function mint(key: ServiceAccountKey, fetch: typeof globalThis.fetch): Promise<Minted> {
  const tokenUri = key.token_uri ?? GOOGLE_TOKEN_URI
  const now = Math.floor(Date.now() / 1000)
  const assertion = await new SignJWT({ scope: SCOPE })
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(key.private_key_id && { kid: key.private_key_id }) })
    .setIssuer(key.client_email)
    .setAudience(tokenUri)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(createPrivateKey(key.private_key))
  const res = await fetch(tokenUri, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ grant_type: GRANT_TYPE, assertion }).toString(),
    redirect: 'manual',
    signal: AbortSignal.timeout(MINT_TIMEOUT_MS),
  })
  const text = await res.text()
  let body: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {}
  try {
    body = JSON.parse(text)
  } catch {
    // Not JSON: described by its status below.
  }
  if (!res.ok || typeof body.access_token !== 'string') {
    const detail = [body.error, body.error_description].filter((s) => typeof s === 'string').join(': ')
    throw new TokenRefused(res.ok ? 502 : res.status, detail.slice(0, 500) || `HTTP ${res.status}`)
  }
  const lifetime = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600
  return { token: body.access_token, expiresAt: Date.now() + lifetime * 1000 }
}

/**
 * The gateway's token cache: one entry per key (its account, key id, token endpoint and a
 * hash of the private key), minting shared by the requests that wait for it.
 *
 * @example
 * ```ts
 * const tokens = accessTokens()
 * const token = await tokens.get(grant.upstream.service_account, fetch)
 * ```
 */
export function accessTokens(): AccessTokens {
  const kept = new Map<string, { minting: Promise<Minted>; minted?: Minted }>()
  const idOf = (key: ServiceAccountKey) =>
    createHash('sha256')
      .update([key.client_email, key.private_key_id ?? '', key.token_uri ?? '', key.private_key].join('\0'))
      .digest('hex')
  const start = (id: string, key: ServiceAccountKey, fetch: typeof globalThis.fetch) => {
    const entry: { minting: Promise<Minted>; minted?: Minted } = { minting: mint(key, fetch) }
    entry.minting.then(
      (m) => {
        entry.minted = m
      },
      () => {
        if (kept.get(id) === entry) kept.delete(id)
      },
    )
    kept.delete(id)
    kept.set(id, entry)
    if (kept.size > MAX_KEYS) kept.delete(kept.keys().next().value!)
    return entry
  }
  return {
    async get(key, fetch) {
      const id = idOf(key)
      let entry = kept.get(id)
      const fresh = (m: Minted | undefined) => m !== undefined && m.expiresAt - EARLY_MS > Date.now()
      // Minted and still fresh, or being minted (the requests waiting share it); else mint now.
      if (!entry || (entry.minted && !fresh(entry.minted))) entry = start(id, key, fetch)
      return (await entry.minting).token
    },
    drop(key, token) {
      const id = idOf(key)
      if (kept.get(id)?.minted?.token === token) kept.delete(id)
    },
  }
}
