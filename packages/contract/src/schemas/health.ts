import * as v from 'valibot'

const Count = v.pipe(v.number(), v.integer(), v.minValue(0))

/** Warm pool statistics. */
export const PoolStats = v.object({ min: Count, max: Count, in_use: Count, idle: Count })

/** Where the pool's image stands: being checked, pulled or built, ready, or failed (`error` says why). */
export const ImageHealth = v.object({
  ref: v.string(),
  state: v.picklist(['unknown', 'checking', 'pulling', 'building', 'ready', 'failed']),
  error: v.optional(v.string()),
})

/** The container engine behind the pool: whether it answers, and the last failure while it did not. */
export const EngineHealth = v.object({
  name: v.string(),
  reachable: v.boolean(),
  last_error: v.optional(v.string()),
  image: v.optional(ImageHealth),
})

/** `GET /health`. `engine` is present when a container runtime is configured. */
export const Health = v.object({
  ok: v.literal(true),
  version: v.string(),
  pool: PoolStats,
  engine: v.optional(EngineHealth),
})

export type PoolStats = v.InferOutput<typeof PoolStats>
export type EngineHealth = v.InferOutput<typeof EngineHealth>
export type ImageHealth = v.InferOutput<typeof ImageHealth>
