import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Description, Id, Name, RecordMeta } from './common.js'

const MemoryType = v.pipe(
  v.string(),
  v.regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be a lowercase word (max 32), e.g. "fact" or "preference"'),
)
const Body = v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(64 * 1024))
/** 1 (trivia) to 5 (always relevant); default 3. */
const Importance = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(5))

/** A memory row: something the agent should remember, for one profile or all of them. */
export const Memory = v.object({
  id: Id('memory'),
  type: MemoryType,
  name: Name,
  body: Body,
  description: v.nullable(Description),
  importance: Importance,
  /** The profile it belongs to; `null` for memory shared by all the caller's profiles. */
  profile_id: v.nullable(Id('profile')),
  ...RecordMeta,
})

/** Body of `POST /v1/memory`: `type`, `name`, `body` required. */
export const CreateMemory = v.strictObject({
  type: MemoryType,
  name: Name,
  body: Body,
  description: v.optional(v.nullable(Description)),
  importance: v.optional(Importance),
  profile_id: v.optional(v.nullable(Id('profile'))),
})

/** Body of `PATCH /v1/memory/:id`. */
export const UpdateMemory = v.partial(CreateMemory)

export type Memory = v.InferOutput<typeof Memory>
export type CreateMemory = v.InferOutput<typeof CreateMemory>
export type UpdateMemory = v.InferOutput<typeof UpdateMemory>
