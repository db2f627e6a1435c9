/** Where each instance answers other instances: preview requests are forwarded to the container's holder there. */
import type { Store } from '../ports/store.js'

const key = (instanceId: string) => `instance-urls:${instanceId}`

/**
 * The advertised URLs (`BERTH_INSTANCE_URL`) of the instances sharing a store.
 *
 * @example
 * ```ts
 * const urls = new InstanceUrls(store)
 * await urls.register('a', 'http://10.0.0.5:3000')
 * await urls.of('a') // 'http://10.0.0.5:3000'
 * ```
 */
export class InstanceUrls {
  constructor(private readonly store: Store) {}

  /** Record this instance's URL (kept in the store: a restarted Redis loses nothing). */
  register(instanceId: string, url: string): Promise<void> {
    return this.store.set(key(instanceId), { url })
  }

  /** The URL an instance advertised, or `null`. */
  async of(instanceId: string): Promise<string | null> {
    return (await this.store.get<{ url: string }>(key(instanceId)))?.url ?? null
  }
}
