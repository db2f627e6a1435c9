import { validationError } from '@berth/contract'
import type { Store } from '../ports/store.js'

/** How a resource applies to the caller's profiles. */
export interface Scoped {
  scope: 'all' | 'selected'
  profile_ids: string[]
}

/**
 * Resolve `scope`/`profile_ids` input against the caller's profiles. Sending
 * `profile_ids` alone means `selected`; `all` clears the list; a profile id that is not
 * the caller's (absent, or another owner's) is a 400 naming the field.
 *
 * @example
 * ```ts
 * const s = await resolveScope(store, caller.id, { profile_ids: ['prof_1'] }, undefined)
 * // { scope: 'selected', profile_ids: ['prof_1'] }
 * ```
 */
export async function resolveScope(
  store: Store,
  owner: string,
  input: { scope?: 'all' | 'selected' | undefined; profile_ids?: string[] | undefined },
  current: Scoped | undefined,
): Promise<Scoped> {
  const scope = input.scope ?? (input.profile_ids !== undefined ? 'selected' : (current?.scope ?? 'all'))
  if (scope === 'all') return { scope, profile_ids: [] }
  const ids = [...new Set(input.profile_ids ?? current?.profile_ids ?? [])]
  await assertOwnProfiles(store, owner, ids, 'profile_ids')
  return { scope, profile_ids: ids }
}

/**
 * 400 VALIDATION_FAILED unless every id is one of the caller's profiles.
 *
 * @example
 * ```ts
 * await assertOwnProfiles(store, caller.id, ['prof_1'], 'profile_ids')
 * ```
 */
export async function assertOwnProfiles(
  store: Store,
  owner: string,
  ids: string[],
  field: string,
  /** `list`: the field is an array and each bad entry is reported as `field.<index>`. */
  shape: 'list' | 'single' = 'list',
): Promise<void> {
  const found = await store.getMany(ids.map((id) => `profiles:${owner}:${id}`))
  const issues = ids
    .map((id, i) => ({ id, i }))
    .filter(({ i }) => found[i] === null)
    .map(({ id, i }) => ({
      location: 'body' as const,
      path: shape === 'single' ? field : `${field}.${i}`,
      message: `profile ${id} does not exist`,
    }))
  if (issues.length) throw validationError(issues)
}

/** True when a scoped resource applies to the profile. */
export function appliesTo(s: Scoped, profileId: string): boolean {
  return s.scope === 'all' || s.profile_ids.includes(profileId)
}
