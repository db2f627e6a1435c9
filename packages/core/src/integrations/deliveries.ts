import { newId, Delivery } from '@berth/contract'
import type { Store } from '../ports/store.js'
import { OwnedCollection, paginate, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { listOrder } from '../records/indexes.js'
import { toView } from '../records/view.js'

/** A stored delivery attempt. `order` sorts attempts made within the same clock tick. */
export interface DeliveryRecord extends OwnedRecord, Omit<Delivery, 'id'> {
  order: number
}

/** Attempts kept per integration; older ones are dropped as new ones arrive. */
const KEEP = 200

let sequence = 0
/** Increasing across calls and restarts (wall time plus a counter), independent of the injected clock. */
function nextOrder(): number {
  sequence = (sequence + 1) % 1000
  return Date.now() * 1000 + sequence
}

/**
 * The record of every delivery attempt of an integration, newest first, the last 200 kept.
 * Keys: `integration-deliveries:<integration>:<owner>:<delivery>`.
 *
 * @example
 * ```ts
 * await deliveries.record('usr_1', { integration_id: 'int_1', event: 'task.completed', ... })
 * const { items } = await deliveries.list('usr_1', 'int_1', { page: 1, limit: 20 })
 * ```
 */
export class DeliveryLog {
  constructor(private readonly store: Store) {}

  private collection(integrationId: string): OwnedCollection<DeliveryRecord> {
    return new OwnedCollection<DeliveryRecord>(this.store, `integration-deliveries:${integrationId}`, 'delivery')
  }

  view(r: DeliveryRecord): Delivery {
    return toView(Delivery, r)
  }

  private async sorted(owner: string, integrationId: string): Promise<DeliveryRecord[]> {
    return this.collection(integrationId).all(owner)
  }

  async record(owner: string, attempt: Omit<Delivery, 'id'>): Promise<Delivery> {
    const record: DeliveryRecord = {
      ...attempt,
      id: newId('delivery'),
      owner_id: owner,
      created_at: attempt.at,
      updated_at: attempt.at,
      order: nextOrder(),
    }
    const collection = this.collection(attempt.integration_id)
    await collection.put(record)
    const all = await this.sorted(owner, attempt.integration_id)
    for (const old of all.slice(KEEP)) await collection.remove(owner, old.id).catch(() => {})
    return this.view(record)
  }

  async list(owner: string, integrationId: string, page: Page): Promise<Paged<Delivery>> {
    const all = await this.sorted(owner, integrationId)
    const paged = paginate(all, page, (r) => listOrder('integration-deliveries', r))
    return { ...paged, items: paged.items.map((r) => this.view(r)) }
  }

  /** Drop every attempt of an integration (it was deleted). */
  async clear(owner: string, integrationId: string): Promise<void> {
    for (const key of await this.store.keys(`integration-deliveries:${integrationId}:${owner}:`))
      await this.store.remove(key)
  }
}
