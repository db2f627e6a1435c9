import * as v from 'valibot'

const Count = v.pipe(v.number(), v.integer(), v.minValue(0))

/** Warm pool statistics. */
export const PoolStats = v.object({ min: Count, max: Count, in_use: Count, idle: Count })

/** `GET /health`. */
export const Health = v.object({ ok: v.literal(true), version: v.string(), pool: PoolStats })

export type PoolStats = v.InferOutput<typeof PoolStats>
