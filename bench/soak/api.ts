/**
 * A small HTTP client for the soak and the standalone tests: JSON in and out, every status
 * recorded (a 5xx anywhere fails the soak), network errors surfaced as `status: 0`.
 */

/** A JSON reply read without its schema, so that a caller can reach into any field of it. */
// biome-ignore lint/suspicious/noExplicitAny: replies are read untyped here; `unknown` would need a cast at every field
export type Json = Record<string, any>

export interface Reply {
  status: number
  body: Json
}

export interface ApiClient {
  /** Where the server is now (it moves to a new port on every restart). */
  url: string
  token: string
  call(method: string, path: string, json?: unknown): Promise<Reply>
  /** Every status seen, for the 5xx check. */
  statuses: number[]
}

/**
 * A client for `url` with a bearer token.
 *
 * @example
 * ```ts
 * const api = apiClient(url, token)
 * const { status, body } = await api.call('POST', '/v1/tasks', { mode: 'batch', profile_id, prompt: 'hi' })
 * ```
 */
export function apiClient(url: string, token: string): ApiClient {
  const client: ApiClient = {
    url,
    token,
    statuses: [],
    async call(method, path, json) {
      let res: Response
      try {
        res = await fetch(client.url + path, {
          method,
          headers: {
            authorization: `Bearer ${client.token}`,
            ...(json !== undefined && { 'content-type': 'application/json' }),
          },
          ...(json !== undefined && { body: JSON.stringify(json) }),
          signal: AbortSignal.timeout(30_000),
        })
      } catch (err) {
        return { status: 0, body: { error: String(err) } }
      }
      client.statuses.push(res.status)
      const text = await res.text().catch(() => '')
      let body: Json = {}
      try {
        body = text ? (JSON.parse(text) as Json) : {}
      } catch {
        body = { raw: text }
      }
      return { status: res.status, body }
    },
  }
  return client
}

/**
 * A user (through the admin API), a `stub` model credential and a profile: what a task needs.
 *
 * @example
 * ```ts
 * const { api, profileId } = await newCaller(url, adminToken, { persistent_sessions: true })
 * ```
 */
export async function newCaller(
  url: string,
  adminToken: string,
  profile: Json = {},
): Promise<{ api: ApiClient; profileId: string; userId: string }> {
  const admin = apiClient(url, adminToken)
  const user = await admin.call('POST', '/admin/users', { name: 'Soak', role: 'user' })
  if (user.status !== 201) throw new Error(`creating a user: ${user.status} ${JSON.stringify(user.body)}`)
  const api = apiClient(url, user.body.key.token as string)
  const key = await api.call('POST', '/v1/api-keys', { name: 'offline', provider: 'stub' })
  if (key.status !== 201) throw new Error(`creating a key: ${key.status} ${JSON.stringify(key.body)}`)
  const prof = await api.call('POST', '/v1/profiles', {
    name: 'Soak',
    slug: 'soak',
    api_key_id: key.body.id,
    default_tools: ['Bash'],
    ...profile,
  })
  if (prof.status !== 201) throw new Error(`creating a profile: ${prof.status} ${JSON.stringify(prof.body)}`)
  return { api, profileId: prof.body.id as string, userId: user.body.user.id as string }
}

export const TERMINAL = ['completed', 'failed', 'cancelled'] as const
