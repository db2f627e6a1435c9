import type { OwnedRecord } from '../records/collection.js'
import type { PlaybookSchedule, PlaybookTrigger } from '@berth/contract'

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
  /** Absent on records older than schedules: `null` and `true`. */
  schedule?: PlaybookSchedule | null
  enabled?: boolean
  /** Epoch ms from which the schedule's slots count (set when it is set, changed or enabled). */
  armed_at?: number
}

/**
 * `playbook-schedules:<id>`: an enabled scheduled playbook, as each instance's tick reads it
 * (the record's copy, kept by every save), so a tick costs one read per schedule.
 */
export interface ScheduleEntry {
  owner_id: string
  schedule: PlaybookSchedule
  armed_at: number
}

/** `playbook-slots:<id>`: the latest slot taken care of, and the run it started (`null`: skipped). */
export interface LastSlot {
  at: number
  run_id: string | null
}

export const SCHEDULES_PREFIX = 'playbook-schedules:'
export const SLOTS_PREFIX = 'playbook-slots:'
