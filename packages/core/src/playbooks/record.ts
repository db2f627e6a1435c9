import type { OwnedRecord } from '../records/collection.js'
import type { PlaybookTrigger } from '@berth/contract'

/** A stored playbook. The webhook secret is kept as its SHA-256 only. */
export interface PlaybookRecord extends OwnedRecord {
  profile_id: string
  name: string
  description: string
  prompt: string
  trigger_type: PlaybookTrigger
  max_turns: number | null
  max_budget_usd: number | null
  allowed_tools: string[] | null
  webhook_secret_hash: string | null
}
