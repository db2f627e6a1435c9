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

/**
 * How a secret reaches a task. `env`: its value is an environment variable of the agent's
 * tools (the agent can read it). `brokered`: the agent sees only a placeholder in that
 * variable; Berth's egress proxy puts the value into the headers of requests to `hosts`.
 */
export const SecretDelivery = v.picklist(['env', 'brokered'])

/** A host a brokered secret may be sent to: a name (`api.example.com`), `*.example.com` (any subdomain), or an IPv4 address; `:port` limits it to that port. */
export const SecretHost = v.pipe(
  v.string(),
  v.regex(
    /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d{1,5})?$/,
    'must be a host name, *.domain or an IP address, optionally with :port',
  ),
  maxLength(253),
)
const SecretHosts = v.pipe(v.array(SecretHost), v.maxLength(32, 'at most 32 hosts'))

/** A secret as returned: its name and scope, never its value. */
export const Secret = v.object({
  id: Id('secret'),
  name: SecretName,
  scope: Scope,
  profile_ids: v.array(Id('profile')),
  delivery: SecretDelivery,
  /** Where a brokered secret may be sent (empty for `env`). */
  hosts: v.array(v.string()),
  ...RecordMeta,
})

/**
 * Body of `POST /v1/secrets`. The value is write-only and encrypted at rest. `delivery`
 * defaults to `env`; `brokered` needs `hosts`, which `env` does not take.
 */
export const CreateSecret = v.strictObject({
  name: SecretName,
  value: SecretValue,
  scope: v.optional(Scope),
  profile_ids: v.optional(ProfileIds),
  delivery: v.optional(SecretDelivery),
  hosts: v.optional(SecretHosts),
})

/** Body of `PATCH /v1/secrets/:id`. */
export const UpdateSecret = v.partial(CreateSecret)

export type Secret = v.InferOutput<typeof Secret>
export type CreateSecret = v.InferOutput<typeof CreateSecret>
export type UpdateSecret = v.InferOutput<typeof UpdateSecret>
export type SecretDelivery = v.InferOutput<typeof SecretDelivery>
