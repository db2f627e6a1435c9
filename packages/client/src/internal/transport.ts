import { routes, type AnyRoute } from '@berth/contract'
import { createFetch } from 'ofetch'
import type { BerthClientOptions } from '../options.js'
import { fetchRetry, retryPolicy, type RetryPolicy } from '../retry.js'
import type { CallOptions } from '../types.js'
import { toBerthError } from './fetch-error.js'
import { fillPath } from './path.js'

/** The input of one call: path parameters, query, JSON body. */
export interface RawInput {
  params?: Record<string, unknown>
  query?: Record<string, unknown>
  body?: unknown
}

/** What a helper needs beyond a JSON call: a non-JSON body (multipart) or a streamed answer. */
export interface RawExtra {
  body?: FormData
  stream?: boolean
}

/** The HTTP side of a client: one `call` per route, with auth, retries and Berth errors. */
export interface Transport {
  options: BerthClientOptions
  /** The route named `name` (throws a TypeError for an unknown one). */
  route(name: string): AnyRoute
  call(route: AnyRoute, input: RawInput | undefined, opts: CallOptions | undefined, extra?: RawExtra): Promise<unknown>
  /** The caller token, asked fresh (it may be a function). */
  token(): Promise<string | undefined>
  /** `path` resolved against the base URL, its prefix kept. */
  url(path: string): string
  names(): string[]
}

/**
 * The ofetch-based transport every client method goes through.
 *
 * @example
 * ```ts
 * const t = createTransport({ baseURL })
 * await t.call(t.route('health'), undefined, undefined)
 * ```
 */
export function createTransport(options: BerthClientOptions): Transport {
  const $fetch = createFetch({ fetch: options.fetch ?? ((...args) => globalThis.fetch(...args)) })
  const policy: RetryPolicy = retryPolicy(options.retry)
  const table = new Map<string, AnyRoute>((routes as readonly AnyRoute[]).map((r) => [r.name, r]))
  const base = options.baseURL.endsWith('/') ? options.baseURL : `${options.baseURL}/`
  const token = async () => (typeof options.token === 'function' ? await options.token() : options.token)
  const url = (path: string) => new URL(path.replace(/^\//, ''), base).href

  async function headersFor(call: CallOptions | undefined): Promise<Record<string, string>> {
    const bearer = await token()
    return {
      accept: 'application/json',
      ...options.headers,
      ...(bearer && { authorization: `Bearer ${bearer}` }),
      ...call?.headers,
    }
  }

  async function call(
    route: AnyRoute,
    input: RawInput | undefined,
    opts: CallOptions | undefined,
    extra: RawExtra = {},
  ): Promise<unknown> {
    const target = url(fillPath(route.path, input?.params))
    const retry = retryPolicy(opts?.retry, policy)
    const timeout = opts?.timeout ?? options.timeout
    const body =
      extra.body ?? (route.body && input?.body !== undefined ? (input.body as Record<string, unknown>) : undefined)
    try {
      return await $fetch(target, {
        method: route.method,
        headers: await headersFor(opts),
        query: input?.query,
        body,
        responseType: extra.stream ? 'stream' : undefined,
        signal: opts?.signal,
        timeout,
        ...fetchRetry(route.method, retry, opts?.signal),
      })
    } catch (err) {
      throw toBerthError(err, { route: route.name, method: route.method, url: target, signal: opts?.signal })
    }
  }

  return {
    options,
    route(name) {
      const found = table.get(name)
      if (!found) throw new TypeError(`Unknown Berth operation "${name}"`)
      return found
    },
    call,
    token,
    url,
    names: () => [...table.keys()],
  }
}
