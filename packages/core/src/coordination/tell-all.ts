import { randomUUID } from 'node:crypto'
import type { Coordination } from './port.js'

interface Told<M> {
  id: string
  message: M
}

/**
 * A message every live instance has handled before its sender goes on: `tell` handles it
 * here, publishes it on `channel`, and resolves once each other instance alive at the time
 * answered that it handled it (on `<channel>:done`), or once `boundMs` passed. Meant for
 * what must take effect everywhere at once, such as a revoked caller key: instances keep
 * what the message drops for at most `boundMs`, so after that wait nothing of it is left
 * anywhere, even on an instance that never answered (gone, or cut off from the backend).
 *
 * @example
 * ```ts
 * const revoked = new TellAll(coordination, 'caller-keys:revoked', ({ hash }) => cache.delete(hash))
 * await revoked.tell({ hash }, 5_000) // no instance trusts the key any more
 * ```
 */
export class TellAll<M> {
  private readonly waiting = new Map<string, { left: Set<string>; done: () => void }>()
  private readonly subscribed: Promise<(() => Promise<void>)[] | null>

  constructor(
    private readonly coordination: Coordination,
    private readonly channel: string,
    private readonly handle: (message: M) => void,
  ) {
    const { pubsub, instanceId } = coordination
    this.subscribed = Promise.all([
      pubsub.subscribe<Told<M>>(channel, (m) => {
        this.handle(m.message)
        pubsub.publish(`${channel}:done`, { id: m.id, by: instanceId }).catch(() => {})
      }),
      pubsub.subscribe<{ id: string; by: string }>(`${channel}:done`, (a) => {
        const w = this.waiting.get(a.id)
        if (w?.left.delete(a.by) && w.left.size === 0) w.done()
      }),
    ]).catch(() => null)
  }

  /** Handle `message` here, then on every other live instance (or wait `boundMs` for their copies to lapse). */
  async tell(message: M, boundMs: number): Promise<void> {
    this.handle(message)
    const id = randomUUID()
    let done = () => {}
    const answered = new Promise<void>((r) => (done = r))
    let timer: ReturnType<typeof setTimeout> | undefined
    try {
      if (!(await this.subscribed)) throw new Error('not subscribed')
      const others = (await this.coordination.instances.alive()).filter((i) => i !== this.coordination.instanceId)
      if (others.length === 0) return
      this.waiting.set(id, { left: new Set(others), done })
      await this.coordination.pubsub.publish<Told<M>>(this.channel, { id, message })
    } catch {
      // The backend out of reach: who is alive is unknown, so wait out the bound.
    }
    const bound = new Promise<void>((r) => (timer = setTimeout(r, boundMs)))
    await Promise.race([answered, bound])
    clearTimeout(timer)
    this.waiting.delete(id)
  }

  /** Stop listening. */
  async close(): Promise<void> {
    for (const off of (await this.subscribed) ?? []) await off().catch(() => {})
  }
}
