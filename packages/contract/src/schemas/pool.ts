import * as v from 'valibot'
import { Id, Timestamp } from './common.js'

/** A container the pool manages. */
export const PoolContainer = v.object({
  id: Id('container'),
  /** The engine's own id (Docker/Podman), for operators. */
  engine_id: v.string(),
  state: v.picklist(['idle', 'in_use']),
  owner_id: v.nullable(v.string()),
  workspace_id: v.nullable(v.string()),
  purpose: v.nullable(v.picklist(['batch', 'session'])),
  created_at: Timestamp,
  claimed_at: v.nullable(Timestamp),
})

export type PoolContainer = v.InferOutput<typeof PoolContainer>
