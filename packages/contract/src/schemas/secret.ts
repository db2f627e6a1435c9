import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, ProfileIds, RecordMeta, Scope } from './common.js'

/** Environment-variable style name: `^[A-Z_][A-Z0-9_]*$`, at most 128 characters. */
export const SecretName = v.pipe(
  v.string(),
  v.regex(/^[A-Z_][A-Z0-9_]*$/, 'must match ^[A-Z_][A-Z0-9_]*$'),
  maxLength(128),
)
const SecretValue = v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(64 * 1024))

/** A secret as returned: its name and scope, never its value. */
export const Secret = v.object({
  id: Id('secret'),
  name: SecretName,
  scope: Scope,
  profile_ids: v.array(Id('profile')),
  ...RecordMeta,
})

/** Body of `POST /v1/secrets`. The value is write-only and encrypted at rest. */
export const CreateSecret = v.strictObject({
  name: SecretName,
  value: SecretValue,
  scope: v.optional(Scope),
  profile_ids: v.optional(ProfileIds),
})

/** Body of `PATCH /v1/secrets/:id`. */
export const UpdateSecret = v.partial(CreateSecret)

export type Secret = v.InferOutput<typeof Secret>
export type CreateSecret = v.InferOutput<typeof CreateSecret>
export type UpdateSecret = v.InferOutput<typeof UpdateSecret>
