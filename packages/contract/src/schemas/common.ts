import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { ERROR_STATUS } from '../errors.js'
import { idPattern, type IdKind } from '../ids.js'

/**
 * Schema of an identifier of one kind, e.g. `Id('profile')` accepts `prof_abc123`.
 *
 * @example
 * ```ts
 * const ProfileId = Id('profile')
 * v.parse(ProfileId, 'prof_abc') // ok
 * ```
 */
export function Id(kind: IdKind) {
  return v.pipe(v.string(), v.regex(idPattern(kind), `must be a ${kind} id`))
}

/** ISO-8601 UTC timestamp string. */
export const Timestamp = v.pipe(v.string(), v.isoTimestamp())

/** Control characters, and UTF-16 surrogates without their pair (not text in any encoding). */
const NOT_TEXT = /[\u0000-\u001f\u007f-\u009f]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A short human name: 1–200 characters (code points), not only whitespace, no control characters or lone surrogates. */
export const Name = v.pipe(
  v.string(),
  v.trim(),
  minLength(1, 'must not be empty'),
  maxLength(200),
  v.check((s) => !NOT_TEXT.test(s), 'must not contain control characters or lone surrogates'),
)

/** Optional free text up to 2,000 characters. */
export const Description = v.pipe(v.string(), maxLength(2000))

/**
 * Query parameters every list accepts: `limit` 1–100 (default 20), and either a 1-based
 * `page` (default 1) or the `cursor` of the previous page's `next_cursor` (not both).
 */
export const PageQuery = {
  page: v.optional(
    v.pipe(
      v.number(),
      v.integer(),
      v.minValue(1),
      v.maxValue(1_000_000),
      v.description('1-based page number (default 1); not with `cursor`. A deep page costs more than a cursor.'),
    ),
  ),
  limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100)), 20),
  cursor: v.optional(
    v.pipe(
      v.string(),
      minLength(1),
      maxLength(2000),
      v.description(
        "The previous page's `next_cursor`: the next page, read from where that one ended whatever its depth; not with `page`. Only valid for the same list, filters and caller.",
      ),
    ),
  ),
}

/** Path parameters of a route addressing one resource by `:id`. */
export function IdParams(kind: IdKind) {
  return v.object({ id: Id(kind) })
}

/** Where a list's next page starts: an opaque cursor for `?cursor=`, or null on the last page. */
const NextCursor = v.pipe(
  v.nullable(v.string()),
  v.description('Pass as `cursor` to read the next page; null on the last page.'),
)

/**
 * A list response `{ <plural>: Item[], total, next_cursor }`.
 *
 * @example
 * ```ts
 * const ProfileList = ListOf('profiles', ProfileSummary)
 * ```
 */
export function ListOf<K extends string, S extends v.GenericSchema>(key: K, item: S) {
  return v.object({ [key]: v.array(item), total: v.pipe(v.number(), v.integer()), next_cursor: NextCursor } as {
    [P in K]: v.ArraySchema<S, undefined>
  } & {
    total: v.SchemaWithPipe<readonly [v.NumberSchema<undefined>, v.IntegerAction<number, undefined>]>
    next_cursor: typeof NextCursor
  })
}

/** The error body every non-2xx response carries. */
export const ErrorBodySchema = v.object({
  error: v.string(),
  code: v.picklist(Object.keys(ERROR_STATUS) as [keyof typeof ERROR_STATUS, ...(keyof typeof ERROR_STATUS)[]]),
  details: v.optional(v.record(v.string(), v.unknown())),
})

/**
 * Which of the caller's profiles a secret, tool, skill, agent or integration applies to:
 * `scope: 'all'` (default) or `scope: 'selected'` with `profile_ids`. Sending
 * `profile_ids` alone implies `selected`. Ids of another caller's profiles → 400.
 */
export const Scope = v.picklist(['all', 'selected'])
export const ProfileIds = v.pipe(v.array(Id('profile')), maxLength(100))

/** Fields every owned record carries in responses. */
export const RecordMeta = {
  created_at: Timestamp,
  updated_at: Timestamp,
}

/** A JSON object of string → string (environment, headers). */
export const StringMap = v.pipe(
  v.record(v.pipe(v.string(), minLength(1), maxLength(200)), v.pipe(v.string(), maxLength(10_000))),
  v.check((m) => Object.keys(m).length <= 100, 'at most 100 entries'),
)
