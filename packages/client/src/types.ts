import type { Routes } from '@berth/contract'

/**
 * Request and response types of every operation, derived from the contract's route table: the
 * valibot schemas of a route decide its input and output, so nothing here repeats a shape.
 */

/** Any route of the table. */
export type TableRoute = Routes[number]

/** Every operation name, e.g. `'profiles.get'` or `'admin.users.create'`. */
export type RouteName = TableRoute['name']

/** The route definition of one operation. */
export type RouteOf<N extends RouteName> = Extract<TableRoute, { name: N }>

/** What valibot (and Standard Schema) put on every schema type: its input and output. */
interface SchemaTypes {
  readonly '~types'?: { readonly input: unknown; readonly output: unknown } | undefined
}
// Same definitions as valibot's InferInput/InferOutput, without importing valibot here.
type In<S> = S extends SchemaTypes ? NonNullable<S['~types']>['input'] : never
type Out<S> = S extends SchemaTypes ? NonNullable<S['~types']>['output'] : never

/** The schema of a route part (`params`, `query`, `body`, `response`), `never` when absent. */
type Part<N extends RouteName, K extends 'params' | 'query' | 'body' | 'response'> = Exclude<RouteOf<N>[K], undefined>
type Has<T> = [T] extends [never] ? false : true
type Simplify<T> = { [K in keyof T]: T[K] }
/** The input part of a route that does not take that part: no key at all. */
type None = Record<never, never>

type ParamsInput<N extends RouteName> = Has<Part<N, 'params'>> extends true ? { params: In<Part<N, 'params'>> } : None
// A query whose fields are all optional (every list) may be left out.
type QueryInput<N extends RouteName> =
  Has<Part<N, 'query'>> extends true
    ? None extends In<Part<N, 'query'>>
      ? { query?: In<Part<N, 'query'>> }
      : { query: In<Part<N, 'query'>> }
    : None
type BodyInput<N extends RouteName> = Has<Part<N, 'body'>> extends true ? { body: In<Part<N, 'body'>> } : None

/**
 * The input of an operation: `{ params }` when its path has parameters, `{ query? }` when
 * it takes a query, `{ body }` when it takes a JSON body. `{}` for an operation without
 * input.
 *
 * @example
 * ```ts
 * const input: RouteInput<'profiles.get'> = { params: { id: 'prof_abc' } }
 * ```
 */
export type RouteInput<N extends RouteName> = Simplify<ParamsInput<N> & QueryInput<N> & BodyInput<N>>

/**
 * The resolved value of an operation: its response schema's output, `void` for a route
 * without a JSON response (204).
 *
 * @example
 * ```ts
 * const profile: RouteOutput<'profiles.get'> = await client.profiles.get({ params: { id } })
 * ```
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a 204 call resolves to `Promise<void>`, the type callers expect of a call with nothing to read
export type RouteOutput<N extends RouteName> = Has<Part<N, 'response'>> extends true ? Out<Part<N, 'response'>> : void

/** True when an operation cannot be called without an input argument. */
export type InputRequired<N extends RouteName> = None extends RouteInput<N> ? false : true

/** Per-call options, layered over the client's own. */
export interface CallOptions {
  /** Extra request headers for this call. */
  headers?: Record<string, string>
  /** Cancel the call (and any retry wait). */
  signal?: AbortSignal
  /** Milliseconds per attempt before the call fails with `TIMEOUT`. */
  timeout?: number
  /** Override the client's retry policy for this call. */
  retry?: RetryOptions | number | false
}

/** When and how idempotent calls are retried. */
export interface RetryOptions {
  /** Retries after the first attempt (default 2). */
  retries?: number
  /** Base backoff in ms, doubled per retry (default 250). */
  delay?: number
  /**
   * Longest wait in ms, for backoff and for a server's `Retry-After` (default 10 000). A
   * `Retry-After` beyond it is not waited for: the error is thrown instead.
   */
  maxDelay?: number
}

/** The arguments of an operation: input (optional when the route needs none), then options. */
export type RouteArgs<N extends RouteName> =
  InputRequired<N> extends true
    ? [input: RouteInput<N>, options?: CallOptions]
    : [input?: RouteInput<N>, options?: CallOptions]

/** One operation as a client method. */
export type RouteMethod<N extends RouteName> = (...args: RouteArgs<N>) => Promise<RouteOutput<N>>
