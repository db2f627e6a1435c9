import type { PubSub } from '@berth/core'
import type { Redis } from 'ioredis'

/**
 * Pub/sub on Redis: messages are published as JSON on `<prefix>ps:<channel>` from the main
 * connection; one subscriber connection per instance (made on first use) holds one Redis
 * subscription per channel and hands each message to the instance's handlers in the order
 * Redis delivers them (per publishing connection, the order of publishing). Redis pub/sub
 * is at most once: a message sent while the subscriber is reconnecting is lost.
 *
 * @example
 * ```ts
 * const pubsub = redisPubSub(client, 'berth:')
 * const off = await pubsub.subscribe('task:1', (m) => console.log(m))
 * await pubsub.publish('task:1', { type: 'task.event' })
 * ```
 */
export function redisPubSub(
  client: Redis,
  prefix: string,
  onError: (err: unknown) => void = () => {},
): PubSub & { close(): Promise<void>; disconnect(): Promise<void> } {
  const channelKey = (channel: string) => `${prefix}ps:${channel}`
  const handlers = new Map<string, Set<(m: unknown) => void>>()
  let sub: Redis | null = null
  // Subscribe and unsubscribe one after another, so a quick off/on never loses the subscription.
  let chain: Promise<unknown> = Promise.resolve()
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = chain.then(fn, fn)
    chain = next.catch(() => {})
    return next
  }
  const subscriber = () => {
    if (!sub) {
      // Its subscriptions wait for the connection (the main client's fail fast instead).
      sub = client.duplicate({ enableOfflineQueue: true, lazyConnect: false })
      sub.on('error', onError) // ioredis reconnects and resubscribes on its own
      sub.on('message', (key: string, text: string) => {
        const set = handlers.get(key)
        if (!set) return
        for (const handler of [...set]) {
          try {
            handler(JSON.parse(text))
          } catch {
            // A subscriber's error stays with it.
          }
        }
      })
    }
    return sub
  }

  return {
    async publish(channel, message) {
      await client.publish(channelKey(channel), JSON.stringify(message))
    },
    async subscribe(channel, handler) {
      const key = channelKey(channel)
      const h = (m: unknown) => handler(m as never)
      await serial(async () => {
        let set = handlers.get(key)
        if (!set) {
          await subscriber().subscribe(key)
          set = new Set()
          handlers.set(key, set)
        }
        set.add(h)
      })
      return () =>
        serial(async () => {
          const set = handlers.get(key)
          if (!set?.delete(h) || set.size > 0) return
          handlers.delete(key)
          await sub?.unsubscribe(key)
        })
    },
    async disconnect() {
      handlers.clear()
      sub?.disconnect()
      sub = null
    },
    async close() {
      handlers.clear()
      await chain
      await sub?.quit().catch(() => {})
      sub = null
    },
  }
}
