import { api } from './api.js'

export interface ProfileSummary {
  id: string
  name: string
  slug: string
  default_tools?: string[]
}

let cached: Promise<ProfileSummary[]> | null = null

/**
 * The caller's profiles (first 100), fetched once per page load.
 *
 * @example
 * ```ts
 * const names = new Map((await profiles()).map((p) => [p.id, p.name]))
 * ```
 */
export function profiles(refresh = false): Promise<ProfileSummary[]> {
  if (!cached || refresh) {
    cached = api<{ profiles: ProfileSummary[] }>('/v1/profiles?limit=100').then((r) => r.profiles)
    cached.catch(() => (cached = null))
  }
  return cached
}

/**
 * Forget the cache (sign-out).
 *
 * @example
 * ```ts
 * resetProfiles()
 * ```
 */
export function resetProfiles(): void {
  cached = null
}
