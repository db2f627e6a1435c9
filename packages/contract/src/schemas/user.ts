import * as v from 'valibot'
import { Id, Name, Timestamp } from './common.js'

export const Role = v.picklist(['user', 'admin'])

/** A user of the deployment: owns resources, authenticates with caller keys. */
export const User = v.object({
  id: Id('user'),
  name: Name,
  role: Role,
  created_at: Timestamp,
})

/** A caller key's metadata (never the key after creation). */
export const CallerKey = v.object({
  id: Id('callerKey'),
  user_id: Id('user'),
  name: v.nullable(Name),
  created_at: Timestamp,
  last_used_at: v.nullable(Timestamp),
})

/** A caller key as created: the only time `token` is shown. */
export const IssuedCallerKey = v.object({
  ...CallerKey.entries,
  /** The bearer token. Shown once; Berth keeps only its SHA-256 hash. */
  token: v.string(),
})

export const CreateUser = v.strictObject({
  name: Name,
  role: v.optional(Role),
})

export const CreateCallerKey = v.strictObject({
  name: v.optional(Name),
})

export type User = v.InferOutput<typeof User>
export type CallerKey = v.InferOutput<typeof CallerKey>
export type IssuedCallerKey = v.InferOutput<typeof IssuedCallerKey>
