import { apiCaller } from './api.js'

/** What the HTTP benchmark sends and expects, once a Berth is seeded. */
export interface Seeded {
  path: string
  headers: Record<string, string>
  body: Buffer
  contentType: string
  /** `RateLimit-Remaining` of a fresh GET of `path`. */
  remaining(): Promise<number>
}

/**
 * Seed a running Berth through its own API (the operator token creates a user, the user a
 * `stub` model key and a profile) and read the profile once, checking that the limiter
 * answered. Shared by the in-process hosts and the standalone one.
 *
 * @example
 * ```ts
 * const seeded = await seedProfile('http://127.0.0.1:3000', ADMIN_TOKEN)
 * seeded.path // '/v1/profiles/prf_…'
 * ```
 */
export async function seedProfile(base: string, adminToken: string): Promise<Seeded> {
  const call = apiCaller(base)
  const created = await call<{ key: { token: string } }>('POST', '/admin/users', adminToken, { name: 'Bench user' })
  const token = created.key.token
  const apiKey = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'Bench stub', provider: 'stub' })
  const profile = await call<{ id: string }>('POST', '/v1/profiles', token, {
    name: 'Bench profile',
    slug: 'bench',
    api_key_id: apiKey.id,
    description: 'Profile read by the HTTP benchmark',
    claude_md: '# Bench\n\nAnswer briefly. Prefer the tools you are given; never guess file contents.\n',
  })
  const path = `/v1/profiles/${profile.id}`
  const headers = { authorization: `Bearer ${token}` }
  const get = () => fetch(base + path, { headers })
  const first = await get()
  const body = Buffer.from(await first.arrayBuffer())
  if (first.status !== 200) throw new Error(`GET ${path} → ${first.status} ${body.toString()}`)
  if (!first.headers.get('ratelimit-remaining'))
    throw new Error('Berth answered without RateLimit headers: is the limiter running?')
  return {
    path,
    headers,
    body,
    contentType: first.headers.get('content-type') ?? '',
    async remaining() {
      const last = await get()
      await last.arrayBuffer()
      return Number(last.headers.get('ratelimit-remaining'))
    },
  }
}
