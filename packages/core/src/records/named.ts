import { validationError, newId, type IdKind } from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from './collection.js'
import { appliesTo, resolveScope, type Scoped } from './scope.js'

/** A stored record with a per-owner unique `name` and a profile scope. */
export interface NamedScopedRecord extends OwnedRecord, Scoped {
  name: string
}

interface ScopeInput {
  name?: string | undefined
  scope?: 'all' | 'selected' | undefined
  profile_ids?: string[] | undefined
}

/** How one resource kind maps input to stored fields and stored fields to its response. */
export interface NamedScopedKind<R extends NamedScopedRecord, V, C extends ScopeInput, U extends ScopeInput> {
  kind: string
  label: string
  idKind: IdKind
  /** Stored fields (besides id, owner, name, scope, timestamps) from a create body. */
  create(input: C): Omit<R, keyof NamedScopedRecord>
  /** Stored fields to change from an update body (only the ones sent). */
  update(input: U, current: R): Partial<Omit<R, keyof NamedScopedRecord>>
  /** The response view: an explicit allow-list of fields. */
  view(record: R): V
  /** Rules that need the store, on the record about to be written (`current`: before an update). */
  check?(owner: string, next: R, current: R | undefined): Promise<void>
}

/**
 * The shared surface of secrets, tools, skills and agents: create/get/list/update/delete
 * with a name unique per owner (400 when taken) and a scope over the caller's profiles
 * (400 for another caller's profile ids).
 *
 * @example
 * ```ts
 * const skills = new NamedScopedService(store, clock, skillKind)
 * await skills.create(caller.id, { name: 'review', body: '# Review\n...' })
 * ```
 */
export class NamedScopedService<
  R extends NamedScopedRecord,
  V,
  C extends ScopeInput & { name: string },
  U extends ScopeInput,
> {
  readonly records: OwnedCollection<R>
  private readonly lock = new KeyedMutex()

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly def: NamedScopedKind<R, V, C, U>,
  ) {
    this.records = new OwnedCollection<R>(store, def.kind, def.label)
  }

  private async checkName(owner: string, name: string, selfId?: string): Promise<void> {
    if ((await this.records.all(owner)).some((r) => r.name === name && r.id !== selfId)) {
      throw validationError([
        { location: 'body', path: 'name', message: `a ${this.def.label} named "${name}" already exists` },
      ])
    }
  }

  async create(owner: string, input: C): Promise<V> {
    const scope = await resolveScope(this.store, owner, input, undefined)
    return this.lock.run(owner, async () => {
      await this.checkName(owner, input.name)
      const now = isoNow(this.clock)
      const record = {
        ...this.def.create(input),
        id: newId(this.def.idKind),
        owner_id: owner,
        name: input.name,
        ...scope,
        created_at: now,
        updated_at: now,
      } as R
      await this.def.check?.(owner, record, undefined)
      return this.def.view(await this.records.put(record))
    })
  }

  async get(owner: string, id: string): Promise<V> {
    return this.def.view(await this.records.get(owner, id))
  }

  async list(owner: string, page: Page): Promise<Paged<V>> {
    const { items, total, next } = await this.records.list(owner, page)
    return { items: items.map((r) => this.def.view(r)), total, next }
  }

  async update(owner: string, id: string, input: U): Promise<V> {
    return this.lock.run(owner, async () => {
      const current = await this.records.get(owner, id)
      if (input.name !== undefined && input.name !== current.name) await this.checkName(owner, input.name, id)
      const scope =
        input.scope !== undefined || input.profile_ids !== undefined
          ? await resolveScope(this.store, owner, input, current)
          : { scope: current.scope, profile_ids: current.profile_ids }
      const next = {
        ...current,
        ...this.def.update(input, current),
        ...(input.name !== undefined && { name: input.name }),
        ...scope,
        updated_at: isoNow(this.clock),
      } as R
      await this.def.check?.(owner, next, current)
      return this.def.view(await this.records.put(next))
    })
  }

  async remove(owner: string, id: string): Promise<void> {
    await this.records.remove(owner, id)
  }

  /** The owner's records that apply to a profile (for materialising a task's container). */
  async forProfile(owner: string, profileId: string): Promise<R[]> {
    return (await this.records.all(owner)).filter((r) => appliesTo(r, profileId))
  }
}

/** Copy only the keys present (not `undefined`) in `input`. */
export function pickDefined<T extends object, K extends keyof T>(input: T, keys: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {}
  for (const k of keys) if (input[k] !== undefined) out[k] = input[k]
  return out
}
