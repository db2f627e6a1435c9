import { BerthError } from '../errors.js'

/**
 * The error a helper rejects with when the caller's signal aborted: a `BerthError` with
 * code `ABORTED` (the signal's reason as its cause).
 *
 * @example
 * ```ts
 * if (signal?.aborted) throw abortError(signal, 'tasks.run')
 * ```
 */
export function abortError(signal: AbortSignal | undefined, route: string): BerthError {
  return new BerthError(`${route} was aborted`, {
    status: 0,
    code: 'ABORTED',
    route,
    method: '',
    url: '',
    cause: signal?.reason,
  })
}

/**
 * `promise`, or a rejection with {@link abortError} as soon as `signal` aborts.
 *
 * @example
 * ```ts
 * await abortable(socket.opened(), signal, 'tasks.run')
 * ```
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined, route: string): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(abortError(signal, route))
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal, route))
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}
