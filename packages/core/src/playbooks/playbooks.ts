import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import {
  validationError,
  newId,
  randomToken,
  Playbook,
  type CreatePlaybook,
  type PlaybookTrigger,
  type UpdatePlaybook,
} from '@berth/contract'
import { term } from '../records/indexes.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import type { PlaybookRecord } from './record.js'
import type { PlaybookRunsService } from './playbook-runs.js'
import type { ProfilesService } from '../resources/profiles.js'

export type { PlaybookRecord }

/**
 * `playbook-index:<id>`: what the public webhook route needs without knowing the owner.
 * The secret's hash lives here too, so a trigger costs one read whether the id exists or not.
 */
interface PlaybookIndex {
  owner_id: string
  trigger_type: PlaybookTrigger
  webhook_secret_hash: string | null
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
 * Playbooks: stored prompts of a profile that run as tasks, on demand or by webhook.
 * A webhook playbook gets a generated secret, shown in the answer that created it and by
 * rotation, stored as a hash and compared in constant time.
 *
 * @example
 * ```ts
 * const pb = await playbooks.create(caller.id, { profile_id, name: 'Triage', prompt: 'Triage new issues', trigger_type: 'webhook' })
 * pb.webhook_secret // 'whsec_…' (this once)
 * ```
 */
export class PlaybooksService {
  readonly records: OwnedCollection<PlaybookRecord>

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly profiles: ProfilesService,
    private readonly runs: PlaybookRunsService,
  ) {
    this.records = new OwnedCollection<PlaybookRecord>(store, 'playbooks', 'playbook')
  }

  view(r: PlaybookRecord, secret?: string): Playbook {
    return toView(Playbook, r, {
      has_webhook_secret: r.webhook_secret_hash !== null,
      ...(secret !== undefined && { webhook_secret: secret }),
      webhook_path: r.trigger_type === 'webhook' ? webhookPath(r.id) : null,
    })
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
    })
    return r
  }

  async create(owner: string, input: CreatePlaybook): Promise<Playbook> {
    await this.assertProfile(owner, input.profile_id)
    const now = isoNow(this.clock)
    const trigger = input.trigger_type ?? 'manual'
    const secret = trigger === 'webhook' ? newSecret() : undefined
    const record = await this.save({
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
      created_at: now,
      updated_at: now,
    })
    return this.view(record, secret)
  }

  async get(owner: string, id: string): Promise<Playbook> {
    return this.view(await this.records.get(owner, id))
  }

  /** The playbooks of one of the owner's profiles (404 for another owner's profile). */
  async listForProfile(owner: string, profileId: string, page: Page): Promise<Paged<Playbook>> {
    await this.profiles.records.get(owner, profileId)
    const { items, total } = await this.records.list(owner, page, term({ profile_id: profileId }))
    return { items: items.map((r) => this.view(r)), total }
  }

  /** Change fields; switching to `webhook` without a secret generates one (in this answer only). */
  async update(owner: string, id: string, input: UpdatePlaybook): Promise<Playbook> {
    const current = await this.records.get(owner, id)
    if (input.profile_id !== undefined && input.profile_id !== current.profile_id)
      await this.assertProfile(owner, input.profile_id)
    const next: PlaybookRecord = { ...current, updated_at: isoNow(this.clock) }
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
    return this.view(await this.save(next), secret)
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
    if (!match || !index || index.trigger_type !== 'webhook') return null
    return this.records.find(index.owner_id, id)
  }
}

function newSecret(): string {
  return `whsec_${randomToken(40)}`
}
