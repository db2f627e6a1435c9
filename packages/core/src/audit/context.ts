/** The request being served, for code that records who did what (the audit log) without threading it through every call. */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { Caller } from '../caller.js'

/** What the pipeline knows about the request a handler serves. */
export interface RequestScope {
  /** The authenticated caller, or null on a public route. */
  caller: Caller | null
  /** The request's id (its valid `x-request-id`, or one Berth made). */
  request_id: string
  /** The client address, or null when the server does not know it. */
  source: string | null
}

const scopes = new AsyncLocalStorage<RequestScope>()

/**
 * Run `fn` as the handling of one request: {@link currentRequest} answers `scope` inside it,
 * across every `await`.
 *
 * @example
 * ```ts
 * await inRequest({ caller, request_id: 'req_1', source: '127.0.0.1' }, () => route.handle(ctx))
 * ```
 */
export function inRequest<T>(scope: RequestScope, fn: () => T): T {
  return scopes.run(scope, fn)
}

/**
 * The request being served, or undefined outside one (a background job, a WebSocket message).
 *
 * @example
 * ```ts
 * const actor = currentRequest()?.caller?.id ?? 'system'
 * ```
 */
export function currentRequest(): RequestScope | undefined {
  return scopes.getStore()
}
