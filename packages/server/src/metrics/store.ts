/** A store whose failed calls are counted (`berth_store_errors_total`), everything else passed through. */
import type { Metrics, Store } from '@berth/core'

const COUNTED = new Set(['get', 'getMany', 'set', 'remove', 'keys', 'put', 'list'])

/**
 * `store` with each rejected call of the Store port counted by its method name; the
 * rejection itself goes on unchanged. Driver extras (a Postgres store's own methods) pass through.
 *
 * @example
 * ```ts
 * const counted = countedStore(sqliteStore('./.data/berth.db'), metrics)
 * ```
 */
export function countedStore<S extends Store>(store: S, metrics: Metrics): S {
  // One wrapper per method, made on first use: a store call is on every request's path.
  const wrapped = new Map<string | symbol, { of: unknown; fn: unknown }>()
  return new Proxy(store, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      const known = wrapped.get(property)
      if (known?.of === value) return known.fn
      // Called on the store itself, never on the proxy: a driver's private fields are not on the proxy.
      const fn =
        typeof property !== 'string' || !COUNTED.has(property)
          ? value.bind(target)
          : (...args: unknown[]) =>
              (value as (...a: unknown[]) => Promise<unknown>).apply(target, args).catch((err: unknown) => {
                metrics.storeError(property)
                throw err
              })
      wrapped.set(property, { of: value, fn })
      return fn
    },
  })
}
