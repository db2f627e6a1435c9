// The API view of a stored record: a parse through the response schema, so a field the
// schema does not list (a key hash, a sealed token, an internal flag) never leaves.
import * as v from 'valibot'

/** A valibot object schema (`v.object`, `v.omit(...)`), whose keys are the view's keys. */
type ObjectSchema = v.GenericSchema & { readonly entries: v.ObjectEntries }

/**
 * The response view of a stored `record`: `{ ...record, ...extra }` parsed through the
 * response `schema`. `v.object` keeps only the keys it lists (nested objects too), so
 * secrets stored beside the API fields are dropped; computed or renamed fields go in
 * `extra`, which wins over the record.
 *
 * A record the schema rejects (written by an older version, say) is still answered, as a
 * copy of the schema's top-level keys: what the hand-written mappers did before. The
 * response check of tests and development (`validateResponses`) flags it as a 500.
 *
 * @example
 * ```ts
 * const view = toView(ApiKey, record, { has_key: record.key_encrypted !== null })
 * // view has no `key_encrypted`, `owner_id` or any other field ApiKey does not list
 * ```
 */
export function toView<S extends ObjectSchema>(schema: S, record: object, extra?: object): v.InferOutput<S> {
  const input: Record<string, unknown> = extra ? { ...record, ...extra } : (record as Record<string, unknown>)
  const parsed = v.safeParse(schema, input)
  if (parsed.success) return parsed.output
  const copy: Record<string, unknown> = {}
  for (const key of Object.keys(schema.entries)) if (key in input) copy[key] = input[key]
  return copy as v.InferOutput<S>
}
