import * as v from 'valibot'

const Count = v.pipe(v.number(), v.integer(), v.minValue(0))

/** `GET /admin/limits`: the rate buckets and concurrency slots in use right now. */
export const LimitsState = v.object({
  /** The per-caller token bucket, or `null` when the server runs a limiter without state to show. */
  rate: v.nullable(
    v.object({
      rpm: v.number(),
      burst: Count,
      /** Callers whose bucket is not full; a caller missing here has all `burst` requests left. */
      callers: v.array(v.object({ caller_id: v.string(), remaining: Count, reset_seconds: Count })),
    }),
  ),
  concurrency: v.object({
    /** Running workspaces allowed per profile. */
    limit: Count,
    /** Profiles with workspaces running, and whose they are (`null` while no container is claimed yet). */
    profiles: v.array(
      v.object({
        profile_id: v.string(),
        owner_id: v.nullable(v.string()),
        running: Count,
        workspace_ids: v.array(v.string()),
      }),
    ),
  }),
})

export type LimitsState = v.InferOutput<typeof LimitsState>
