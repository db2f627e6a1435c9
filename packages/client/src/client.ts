import { routes, type AnyRoute } from '@berth/core/contract'
import { createFetch } from 'ofetch'
import { fillPath } from './internal/path.js'
import { toBerthError } from './internal/fetch-error.js'
import { retryDelay, retryPolicy, type RetryPolicy } from './retry.js'
import { buildTree, type RouteTree } from './tree.js'
import type { CallOptions, RetryOptions, RouteArgs, RouteName, RouteOutput } from './types.js'

/** Options of {@link createBerthClient}. */
export interface BerthClientOptions {
  /** Where Berth answers, e.g. `http://127.0.0.1:3000` (a path prefix like `/berth` is kept). */
  baseURL: string
  /** Caller key sent as `Authorization: Bearer …`; a function is asked before every attempt. */
  token?: string | (() => string | undefined | Promise<string | undefined>)
  /** A `fetch` implementation (default: the global one). */
  fetch?: typeof globalThis.fetch
  /** Retry policy for idempotent calls; a number is the retry count, `false` disables. Default 2 retries. */
  retry?: RetryOptions | number | false
  /** Milliseconds per attempt before failing with `TIMEOUT` (default: no timeout). */
  timeout?: number
  /** Headers sent with every call. */
  headers?: Record<string, string>
}

/** The typed client: one method per operation, nested by its dotted name, plus `request`. */
export type BerthClient = RouteTree & {
  /**
   * Call any operation by name; the same as the nested method.
   *
   * @example
   * ```ts
   * const profile = await client.request('profiles.get', { params: { id } })
   * ```
   */
  request<N extends RouteName>(name: N, ...args: RouteArgs<N>): Promise<RouteOutput<N>>
}

interface RawInput {
  params?: Record<string, unknown>
  query?: Record<string, unknown>
  body?: unknown
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    function onAbort() {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/**
 * Create a typed Berth client. Every operation of the route table is a method nested by
 * its name, with input and output types from the route's schemas. Failed calls reject
 * with a `BerthError`; idempotent calls (GET, PUT, DELETE, HEAD, OPTIONS) are retried on
 * network errors, timeouts, 429, 502, 503 and 504, honouring `Retry-After`.
 *
 * @example
 * ```ts
 * const berth = createBerthClient({ baseURL: 'http://127.0.0.1:3000', token: process.env.BERTH_TOKEN })
 * const key = await berth.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
 * const profile = await berth.profiles.create({ body: { name: 'Docs', slug: 'docs', api_key_id: key.id } })
 * const { profiles, total } = await berth.profiles.list({ query: { page: 1 } })
 * await berth.profiles.delete({ params: { id: profile.id } })
 * ```
 */
export function createBerthClient(options: BerthClientOptions): BerthClient {
  const $fetch = createFetch({ fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)) })
  const policy: RetryPolicy = retryPolicy(options.retry)
  const table = new Map<string, AnyRoute>((routes as readonly AnyRoute[]).map((r) => [r.name, r]))

  async function headersFor(call: CallOptions | undefined): Promise<Record<string, string>> {
    const token = typeof options.token === 'function' ? await options.token() : options.token
    return {
      accept: 'application/json',
      ...options.headers,
      ...(token && { authorization: `Bearer ${token}` }),
      ...call?.headers,
    }
  }

  async function call(route: AnyRoute, input: RawInput | undefined, opts: CallOptions | undefined): Promise<unknown> {
    const path = fillPath(route.path, input?.params)
    const url = new URL(path.replace(/^\//, ''), options.baseURL.endsWith('/') ? options.baseURL : `${options.baseURL}/`).href
    const retry = retryPolicy(opts?.retry, policy)
    const timeout = opts?.timeout ?? options.timeout
    for (let attempt = 0; ; attempt++) {
      try {
        return await $fetch(url, {
          method: route.method,
          headers: await headersFor(opts),
          ...(input?.query && { query: input.query }),
          ...(route.body && input?.body !== undefined && { body: input.body as Record<string, unknown> }),
          ...(opts?.signal && { signal: opts.signal }),
          ...(timeout !== undefined && { timeout }),
          retry: false,
        })
      } catch (err) {
        const error = toBerthError(err, { route: route.name, method: route.method, url, signal: opts?.signal })
        const wait = retryDelay(error, route.method, attempt, retry)
        if (wait === undefined) throw error
        await sleep(wait, opts?.signal).catch((reason: unknown) => {
          throw toBerthError(reason, { route: route.name, method: route.method, url, signal: opts?.signal })
        })
      }
    }
  }

  function invoke(name: string) {
    const route = table.get(name)!
    return (input?: RawInput, opts?: CallOptions) => call(route, input, opts)
  }

  const tree = buildTree([...table.keys()], invoke)
  Object.defineProperty(tree, 'request', {
    enumerable: false,
    value: (name: string, input?: RawInput, opts?: CallOptions) => {
      const route = table.get(name)
      if (!route) return Promise.reject(new TypeError(`Unknown Berth operation "${name}"`))
      return call(route, input, opts)
    },
  })
  return tree as unknown as BerthClient
}
