import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import {
  ApiError,
  validationError,
  newId,
  randomToken,
  Playbook,
  type CreatePlaybook,
  type PlaybookSchedule,
  type PlaybookTrigger,
  type UpdatePlaybook,
} from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import { term } from '../records/indexes.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import { SCHEDULES_PREFIX, SLOTS_PREFIX, type LastSlot, type PlaybookRecord, type ScheduleEntry } from './record.js'
import { NEXT_RUNS_SHOWN, nextRuns, parseSchedule } from './schedule.js'
import type { PlaybookRunsService } from './playbook-runs.js'
import type { ProfilesService } from '../resources/profiles.js'

export type { PlaybookRecord }

/** The operator's limits on schedules: the least interval between two runs (s), active schedules per caller (`null`: none). */
export interface ScheduleLimits {
  minIntervalS?: number | undefined
  maxPerCaller?: number | null | undefined
}

/** The limits on schedules unless the server sets others: runs a minute apart at least, 20 active schedules per caller. */
export const DEFAULT_SCHEDULE_LIMITS = { minIntervalS: 60, maxPerCaller: 20 } as const

/**
 * `playbook-index:<id>`: what the public webhook route needs without knowing the owner.
 * The secret's hash lives here too, so a trigger costs one read whether the id exists or not.
 */
interface PlaybookIndex {
  owner_id: string
  trigger_type: PlaybookTrigger
  webhook_secret_hash: string | null
  /** Absent on indexes written before playbooks could be disabled. */
  enabled?: boolean
}

const hash = (secret: string) => createHash('sha256').update(secret, 'utf8').digest('hex')
/** Compared against when there is no stored hash, so every miss does the same work as a wrong secret. */
const DECOY_HASH = randomBytes(32).toString('hex')

/**
 * The path a webhook playbook is triggered at (`{secret}` stands for the secret).
 *
 * @example
 * ```ts
 * webhookPath('pb_1') // '/api/playbooks/pb_1/webhook/{secret}'
 * ```
 */
export function webhookPath(id: string, secret = '{secret}'): string {
  return `/api/playbooks/${id}/webhook/${secret}`
}

/**
 * Playbooks: stored prompts of a profile that run as tasks, on demand, by webhook or on a
 * schedule (run by the {@link PlaybookScheduler}). A webhook playbook gets a generated
 * secret, shown in the answer that created it and by rotation, stored as a hash and
 * compared in constant time. A schedule whose runs come closer than the server's least
 * interval is 400; one active schedule more than a caller may have is 409.
 *
 * @example
 * ```ts
 * const pb = await playbooks.create(caller.id, { profile_id, name: 'Triage', prompt: 'Triage new issues', trigger_type: 'webhook' })
 * pb.webhook_secret // 'whsec_…' (this once)
 * ```
 */
export class PlaybooksService {
  readonly records: OwnedCollection<PlaybookRecord>
  private readonly minIntervalS: number
  private readonly maxPerCaller: number | null
  /** A caller's active-schedule count and the write that adds one must not interleave (on this instance). */
  private readonly scheduleLock = new KeyedMutex()

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly profiles: ProfilesService,
    private readonly runs: PlaybookRunsService,
    limits: ScheduleLimits = {},
  ) {
    this.records = new OwnedCollection<PlaybookRecord>(store, 'playbooks', 'playbook')
    this.minIntervalS = limits.minIntervalS ?? DEFAULT_SCHEDULE_LIMITS.minIntervalS
    this.maxPerCaller = limits.maxPerCaller === undefined ? DEFAULT_SCHEDULE_LIMITS.maxPerCaller : limits.maxPerCaller
  }

  /**
   * 409 CONFLICT when the owner already has as many active schedules as it may (the one
   * being saved, `selfId`, not counted), so a schedule more would be one too many.
   */
  private async assertScheduleRoom(owner: string, selfId: string | null): Promise<void> {
    if (this.maxPerCaller === null) return
    const active = (await this.records.all(owner)).filter((r) => r.id !== selfId && isActiveSchedule(r)).length
    if (active >= this.maxPerCaller) {
      throw new ApiError(
        'CONFLICT',
        `You have ${active} active scheduled playbooks, as many as this server allows: disable or delete one first`,
        { limit: this.maxPerCaller, active },
      )
    }
  }

  /** The API view; `last` is the schedule's latest slot (see {@link present}). */
  view(r: PlaybookRecord, secret?: string, last?: LastSlot | null): Playbook {
    const schedule = r.trigger_type === 'schedule' ? (r.schedule ?? null) : null
    const enabled = r.enabled ?? true
    return toView(Playbook, r, {
      has_webhook_secret: r.webhook_secret_hash !== null,
      ...(secret !== undefined && { webhook_secret: secret }),
      webhook_path: r.trigger_type === 'webhook' ? webhookPath(r.id) : null,
      enabled,
      schedule,
      next_runs: schedule && enabled ? nextRuns(schedule, this.clock.now(), NEXT_RUNS_SHOWN) : [],
      last_slot: last ? { at: new Date(last.at).toISOString(), run_id: last.run_id } : null,
    })
  }

  /** Views of `records` with their latest slots, in one store read. */
  private async present(records: PlaybookRecord[], secret?: string): Promise<Playbook[]> {
    const slots = await this.store.getMany<LastSlot>(records.map((r) => `${SLOTS_PREFIX}${r.id}`))
    return records.map((r, i) => this.view(r, secret, slots[i]))
  }

  private async assertProfile(owner: string, profileId: string): Promise<void> {
    if (!(await this.profiles.records.find(owner, profileId))) {
      throw validationError([{ location: 'body', path: 'profile_id', message: `profile ${profileId} does not exist` }])
    }
  }

  /** Store the record and the index the public route reads. */
  private async save(r: PlaybookRecord): Promise<PlaybookRecord> {
    await this.records.put(r)
    await this.store.set<PlaybookIndex>(`playbook-index:${r.id}`, {
      owner_id: r.owner_id,
      trigger_type: r.trigger_type,
      webhook_secret_hash: r.webhook_secret_hash,
      enabled: r.enabled ?? true,
    })
    // The scheduler's tick reads only these entries: one per enabled schedule.
    if (r.trigger_type === 'schedule' && r.schedule && (r.enabled ?? true))
      await this.store.set<ScheduleEntry>(`${SCHEDULES_PREFIX}${r.id}`, {
        owner_id: r.owner_id,
        schedule: r.schedule,
        armed_at: r.armed_at ?? Date.parse(r.updated_at),
      })
    else await this.store.remove(`${SCHEDULES_PREFIX}${r.id}`)
    return r
  }

  async create(owner: string, input: CreatePlaybook): Promise<Playbook> {
    await this.assertProfile(owner, input.profile_id)
    const now = isoNow(this.clock)
    const trigger = input.trigger_type ?? 'manual'
    const schedule = scheduleFor(trigger, input.schedule, null, this.minIntervalS)
    const secret = trigger === 'webhook' ? newSecret() : undefined
    const record = await this.saveNew({
      id: newId('playbook'),
      owner_id: owner,
      profile_id: input.profile_id,
      name: input.name,
      description: input.description ?? '',
      prompt: input.prompt,
      trigger_type: trigger,
      max_turns: input.max_turns ?? null,
      max_budget_usd: input.max_budget_usd ?? null,
      allowed_tools: input.allowed_tools ?? null,
      webhook_secret_hash: secret ? hash(secret) : null,
      schedule,
      enabled: input.enabled ?? true,
      armed_at: this.clock.now(),
      created_at: now,
      updated_at: now,
    })
    return this.view(record, secret)
  }

  async get(owner: string, id: string): Promise<Playbook> {
    const [view] = await this.present([await this.records.get(owner, id)])
    return view!
  }

  /** The playbooks of one of the owner's profiles (404 for another owner's profile). */
  async listForProfile(owner: string, profileId: string, page: Page): Promise<Paged<Playbook>> {
    await this.profiles.records.get(owner, profileId)
    const { items, total, next } = await this.records.list(owner, page, term({ profile_id: profileId }))
    return { items: await this.present(items), total, next }
  }

  /** Change fields; switching to `webhook` without a secret generates one (in this answer only). */
  async update(owner: string, id: string, input: UpdatePlaybook): Promise<Playbook> {
    const current = await this.records.get(owner, id)
    if (input.profile_id !== undefined && input.profile_id !== current.profile_id)
      await this.assertProfile(owner, input.profile_id)
    const trigger = input.trigger_type ?? current.trigger_type
    const earlier = current.trigger_type === 'schedule' ? (current.schedule ?? null) : null
    const schedule = scheduleFor(trigger, input.schedule, earlier, this.minIntervalS)
    const enabled = input.enabled ?? current.enabled ?? true
    // A new schedule, or one enabled again, counts its slots from now: what passed before is not missed.
    const rearm = !sameTimes(schedule, earlier) || (enabled && !(current.enabled ?? true))
    const next: PlaybookRecord = {
      ...current,
      schedule,
      enabled,
      armed_at: rearm ? this.clock.now() : current.armed_at,
      updated_at: isoNow(this.clock),
    }
    for (const k of [
      'profile_id',
      'name',
      'description',
      'prompt',
      'trigger_type',
      'max_turns',
      'max_budget_usd',
      'allowed_tools',
    ] as const) {
      if (input[k] !== undefined) (next as unknown as Record<string, unknown>)[k] = input[k]
    }
    const secret = next.trigger_type === 'webhook' && !next.webhook_secret_hash ? newSecret() : undefined
    if (secret) next.webhook_secret_hash = hash(secret)
    const saved = isActiveSchedule(current) ? await this.save(next) : await this.saveNew(next)
    const [view] = await this.present([saved], secret)
    return view!
  }

  /** Save a record that was not an active schedule before: within the owner's cap when it is one now. */
  private saveNew(r: PlaybookRecord): Promise<PlaybookRecord> {
    if (!isActiveSchedule(r)) return this.save(r)
    return this.scheduleLock.run(r.owner_id, async () => {
      await this.assertScheduleRoom(r.owner_id, r.id)
      return this.save(r)
    })
  }

  /** A new webhook secret; the old one stops working at once. */
  async rotateSecret(
    owner: string,
    id: string,
  ): Promise<{ playbook_id: string; webhook_secret: string; webhook_path: string }> {
    const current = await this.records.get(owner, id)
    const secret = newSecret()
    await this.save({ ...current, webhook_secret_hash: hash(secret), updated_at: isoNow(this.clock) })
    return { playbook_id: id, webhook_secret: secret, webhook_path: webhookPath(id, secret) }
  }

  /** The playbook, its run history and its index go; a run under way finishes. */
  async remove(owner: string, id: string): Promise<void> {
    await this.records.get(owner, id)
    await this.store.remove(`playbook-index:${id}`)
    await this.store.remove(`${SCHEDULES_PREFIX}${id}`)
    await this.store.remove(`${SLOTS_PREFIX}${id}`)
    await this.records.remove(owner, id)
    await this.runs.removeAll(owner, id)
  }

  /**
   * The webhook playbook `id` if `secret` is its secret, else `null`. One store read, one
   * hash and one constant-time comparison whether the id is unknown, the secret wrong or
   * the playbook not a webhook one, so the answer time tells none of them apart.
   */
  async verifyWebhook(id: string, secret: string): Promise<PlaybookRecord | null> {
    const index = await this.store.get<PlaybookIndex>(`playbook-index:${id}`)
    const expected = Buffer.from(index?.webhook_secret_hash ?? DECOY_HASH, 'hex')
    const given = Buffer.from(hash(secret), 'hex')
    const match = timingSafeEqual(given, expected)
    if (!match || !index || index.trigger_type !== 'webhook' || index.enabled === false) return null
    return this.records.find(index.owner_id, id)
  }
}

/**
 * The schedule a playbook with `trigger` keeps: the body's (validated), else the one it
 * had; `null` for other triggers. 400 naming `schedule` when it is missing or out of place.
 */
function scheduleFor(
  trigger: PlaybookTrigger,
  input: CreatePlaybook['schedule'],
  earlier: PlaybookSchedule | null,
  minIntervalS: number,
): PlaybookSchedule | null {
  const refuse = (message: string) => validationError([{ location: 'body', path: 'schedule', message }])
  if (trigger !== 'schedule') {
    if (input !== undefined) throw refuse('is only taken with trigger_type "schedule"')
    return null
  }
  if (input !== undefined) return parseSchedule(input, minIntervalS)
  if (!earlier) throw refuse('is required with trigger_type "schedule"')
  return earlier
}

/** An enabled playbook on a schedule: what the per-caller cap counts. */
const isActiveSchedule = (r: Pick<PlaybookRecord, 'trigger_type' | 'schedule' | 'enabled'>) =>
  r.trigger_type === 'schedule' && !!r.schedule && (r.enabled ?? true)

const sameTimes = (a: PlaybookSchedule | null, b: PlaybookSchedule | null) =>
  a?.cron === b?.cron && a?.timezone === b?.timezone

function newSecret(): string {
  return `whsec_${randomToken(40)}`
}
