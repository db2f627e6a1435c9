// The API view of a stored record: its declared fields copied through the response schema,
// so a field the schema does not list (a key hash, a sealed token, an internal flag) never leaves.
import * as v from 'valibot'
import { projection } from './project.js'

/** A valibot object schema (`v.object`, `v.omit(...)`), whose keys are the view's keys. */
type ObjectSchema = v.GenericSchema & { readonly entries: v.ObjectEntries }

/**
 * The response view of a stored `record`: `{ ...record, ...extra }` read through the
 * response `schema`. Only the keys the schema lists are copied (nested objects and arrays
 * too), so secrets stored beside the API fields are dropped; computed or renamed fields go
 * in `extra`, which wins over the record.
 *
 * Every read answers a view, so the schema is compiled once into a copy of its keys
 * (`project.ts`) instead of a valibot parse per read: for a record of the schema's types the
 * result is what `v.parse` returns. A record of other types (written by an older version,
 * say) is parsed by valibot as before, and when that fails too it is still answered with
 * its declared keys only (never an unlisted one); the response check of tests and
 * development (`validateResponses`) flags it as a 500.
 *
 * @example
 * ```ts
 * const view = toView(ApiKey, record, { has_key: record.key_encrypted !== null })
 * // view has no `key_encrypted`, `owner_id` or any other field ApiKey does not list
 * ```
 */
export function toView<S extends ObjectSchema>(schema: S, record: object, extra?: object): v.InferOutput<S> {
  const state = { ok: true }
  const view = projection(schema)(record, state, extra as Record<string, unknown> | undefined)
  if (state.ok) return view as v.InferOutput<S>
  const parsed = v.safeParse(schema, extra ? { ...record, ...extra } : record)
  return (parsed.success ? parsed.output : view) as v.InferOutput<S>
}
