import type { FetchError } from 'ofetch'
import { BerthError, type BerthErrorCode } from '../errors.js'

/** Where the failed call was going, for the error's fields and message. */
export interface CallSite {
  route: string
  method: string
  url: string
  signal?: AbortSignal | undefined
}

function isErrorBody(data: unknown): data is { error: string; code: string; details?: Record<string, unknown> } {
  return (
    typeof data === 'object' &&
    data !== null &&
    typeof (data as { error?: unknown }).error === 'string' &&
    typeof (data as { code?: unknown }).code === 'string'
  )
}

/** The innermost cause's text, e.g. `connect ECONNREFUSED 127.0.0.1:1` under undici's `fetch failed`. */
function reason(err: unknown): string {
  let current: unknown = err
  let text = String(err)
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    text = current.message
    current = current.cause
  }
  return text
}

/**
 * Turn whatever ofetch threw into a {@link BerthError}: Berth's `{ error, code, details }`
 * body when the server sent one, a client code (`NETWORK_ERROR`, `TIMEOUT`, `ABORTED`,
 * `HTTP_ERROR`) otherwise.
 *
 * @example
 * ```ts
 * try { await $fetch(url) } catch (err) { throw toBerthError(err, { route, method, url }) }
 * ```
 */
export function toBerthError(err: unknown, site: CallSite): BerthError {
  const fetchError = err as Partial<FetchError> & Error
  const response = fetchError?.response
  const base = { route: site.route, method: site.method, url: site.url }
  if (response) {
    const data: unknown = fetchError.data
    if (isErrorBody(data)) {
      return new BerthError(data.error, {
        ...base,
        status: response.status,
        code: data.code as BerthErrorCode,
        details: data.details,
        body: data,
        headers: response.headers,
      })
    }
    return new BerthError(`${site.method} ${site.url} answered ${response.status} ${response.statusText}`.trim(), {
      ...base,
      status: response.status,
      code: 'HTTP_ERROR',
      body: data,
      headers: response.headers,
    })
  }
  const cause = fetchError?.cause ?? err
  if (site.signal?.aborted) {
    return new BerthError(`${site.method} ${site.url} was aborted`, { ...base, status: 0, code: 'ABORTED', cause })
  }
  if ((cause as Error | undefined)?.name === 'TimeoutError') {
    return new BerthError(`${site.method} ${site.url} timed out`, { ...base, status: 0, code: 'TIMEOUT', cause })
  }
  return new BerthError(`Could not reach Berth: ${site.method} ${site.url}: ${reason(cause)}`, {
    ...base,
    status: 0,
    code: 'NETWORK_ERROR',
    cause,
  })
}
