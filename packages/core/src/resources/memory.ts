import { newId, Memory, type CreateMemory, type UpdateMemory } from '@berth/contract'
import { term } from '../records/indexes.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { pickDefined } from '../records/named.js'
import { toView } from '../records/view.js'
import { assertOwnProfiles } from '../records/scope.js'

export interface MemoryRecord extends OwnedRecord, Memory {}

/**
 * Memory rows. The list spans all of the caller's profiles (filter with `profile_id`);
 * a row without `profile_id` is shared by all of them.
 *
 * @example
 * ```ts
 * await memory.create(caller.id, { type: 'preference', name: 'tone', body: 'Be brief.' })
 * ```
 */
export class MemoryService {
  readonly records: OwnedCollection<MemoryRecord>

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {
    this.records = new OwnedCollection<MemoryRecord>(store, 'memory', 'memory')
  }

  view(r: MemoryRecord): Memory {
    return toView(Memory, r)
  }

  async create(owner: string, input: CreateMemory): Promise<Memory> {
    if (input.profile_id) await assertOwnProfiles(this.store, owner, [input.profile_id], 'profile_id', 'single')
    const now = isoNow(this.clock)
    const record: MemoryRecord = {
      id: newId('memory'),
      owner_id: owner,
      type: input.type,
      name: input.name,
      body: input.body,
      description: input.description ?? null,
      importance: input.importance ?? 3,
      profile_id: input.profile_id ?? null,
      created_at: now,
      updated_at: now,
    }
    return this.view(await this.records.put(record))
  }

  async get(owner: string, id: string): Promise<Memory> {
    return this.view(await this.records.get(owner, id))
  }

  async list(
    owner: string,
    page: Page,
    filter: { profile_id?: string | undefined; type?: string | undefined },
  ): Promise<Paged<Memory>> {
    const { items, total, next } = await this.records.list(
      owner,
      page,
      term({ profile_id: filter.profile_id, type: filter.type }),
    )
    return { items: items.map((r) => this.view(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateMemory): Promise<Memory> {
    const r = await this.records.get(owner, id)
    if (input.profile_id) await assertOwnProfiles(this.store, owner, [input.profile_id], 'profile_id', 'single')
    const next: MemoryRecord = {
      ...r,
      ...pickDefined(input, ['type', 'name', 'body', 'description', 'importance', 'profile_id'] as const),
      updated_at: isoNow(this.clock),
    }
    return this.view(await this.records.put(next))
  }

  async remove(owner: string, id: string): Promise<void> {
    await this.records.remove(owner, id)
  }

  /** Rows a task of this profile should see: its own plus the shared ones, most important first. */
  async forProfile(owner: string, profileId: string): Promise<Memory[]> {
    return (await this.records.all(owner))
      .filter((r) => r.profile_id === null || r.profile_id === profileId)
      .sort((a, b) => b.importance - a.importance)
      .map((r) => this.view(r))
  }
}
