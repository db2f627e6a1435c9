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

/** The store: its driver and whether it answered the last look. */
export const StoreHealth = v.object({
  driver: v.string(),
  reachable: v.boolean(),
  last_error: v.optional(v.string()),
})

/** The coordination backend: whether it is reachable and whether this instance holds its lease. */
export const CoordinationHealth = v.object({
  driver: v.string(),
  reachable: v.boolean(),
  leased: v.boolean(),
})

/** `GET /health`. `engine` is present when a container runtime is configured. */
export const Health = v.object({
  ok: v.literal(true),
  version: v.string(),
  pool: PoolStats,
  engine: v.optional(EngineHealth),
  store: v.optional(StoreHealth),
  coordination: v.optional(CoordinationHealth),
})

/** What `GET /health/ready` looked at: each true when it does not stand in the way of taking tasks. */
export const ReadinessChecks = v.object({
  store: v.boolean(),
  coordination: v.boolean(),
  engine: v.boolean(),
  draining: v.boolean(),
})

/** `GET /health/ready` when the instance can take tasks (otherwise a 503 whose `details.checks` says why). */
export const Readiness = v.object({ ready: v.literal(true), checks: ReadinessChecks })

export type PoolStats = v.InferOutput<typeof PoolStats>
export type EngineHealth = v.InferOutput<typeof EngineHealth>
export type ImageHealth = v.InferOutput<typeof ImageHealth>
export type StoreHealth = v.InferOutput<typeof StoreHealth>
export type CoordinationHealth = v.InferOutput<typeof CoordinationHealth>
export type ReadinessChecks = v.InferOutput<typeof ReadinessChecks>
