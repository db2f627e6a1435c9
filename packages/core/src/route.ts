import type * as v from 'valibot'
import type {
  AuthLevel,
  AnyRoute as AnyDeclaration,
  HttpMethod,
  RouteDef as RouteDeclaration,
  Routes,
} from '@berth/contract'
import type { Caller } from './caller.js'
import type { Services } from './services.js'

export type { Caller } from './caller.js'
export type { AuthLevel, HttpMethod, MultipartBody } from '@berth/contract'

type AnySchema = v.GenericSchema
type Out<S> = S extends AnySchema ? v.InferOutput<S> : undefined
// biome-ignore lint/suspicious/noConfusingVoidType: a 204 handler returns a service call's `Promise<void>`, which `undefined` would refuse
type Result<S> = S extends AnySchema ? v.InferOutput<S> : void

/** What a handler receives: the validated input, the caller and the services. */
export interface RouteContext<P, Q, B, A extends AuthLevel> {
  caller: A extends 'public' ? Caller | null : Caller
  params: P
  query: Q
  body: B
  services: Services
  /** The original web request (headers, client info). */
  request: Request
}

/** The value a handler returns: the response body, or a web `Response` for non-JSON routes. */
export type RouteResult<R> = R | Response

type HandlerFn<P, Q, B, R, A extends AuthLevel> = (
  ctx: RouteContext<Out<P>, Out<Q>, Out<B>, A>,
) => Promise<RouteResult<Result<R>>> | RouteResult<Result<R>>

/** The handler of one declared route, its input and output types read from the declaration's schemas. */
export type Handler<D> =
  D extends RouteDeclaration<string, HttpMethod, string, infer A, infer P, infer Q, infer B, infer R>
    ? HandlerFn<P, Q, B, R, A>
    : never

/** One handler per route of the table, by route name. */
export type Handlers<T extends readonly AnyDeclaration[]> = { [D in T[number] as D['name']]: Handler<D> }

/** One handler per route of the contract's table, by route name. */
export type HandlerMap = Handlers<Routes>

/** The handler of the contract's route named `N`. */
export type HandlerOf<N extends keyof HandlerMap> = HandlerMap[N]

/** A route declaration with its handler: what the server mounts. */
export interface RouteDef<
  Name extends string = string,
  M extends HttpMethod = HttpMethod,
  Path extends string = string,
  A extends AuthLevel = AuthLevel,
  P extends AnySchema | undefined = AnySchema | undefined,
  Q extends AnySchema | undefined = AnySchema | undefined,
  B extends AnySchema | undefined = AnySchema | undefined,
  R extends AnySchema | undefined = AnySchema | undefined,
> extends RouteDeclaration<Name, M, Path, A, P, Q, B, R> {
  handle: HandlerFn<P, Q, B, R, A>
}

/**
 * Any route with its handler (the mounted table's element type). Each handler takes its own
 * input types, so the schema slots are `any`: routes of every shape share one table.
 */
// biome-ignore lint/suspicious/noExplicitAny: each handler's context is typed by its own schemas; no other slot type admits every handler (the parameter is contravariant)
export type AnyRoute = RouteDef<string, HttpMethod, string, AuthLevel, any, any, any, any>

/**
 * Define one operation the contract does not declare (the server's own documents): its
 * declaration and handler together. Operations of the public API are declared in
 * `@berth/contract` and get their handlers through {@link attachHandlers}.
 *
 * @example
 * ```ts
 * export const openApiJson = defineRoute({
 *   name: 'openapi', method: 'GET', path: '/openapi.json', auth: 'public',
 *   tag: 'system', summary: 'This API as an OpenAPI 3.1 document', produces: 'application/json',
 *   handle: () => new Response(JSON.stringify(document)),
 * })
 * ```
 */
export function defineRoute<
  const Name extends string,
  const M extends HttpMethod,
  const Path extends string,
  const A extends AuthLevel,
  P extends AnySchema | undefined = undefined,
  Q extends AnySchema | undefined = undefined,
  B extends AnySchema | undefined = undefined,
  R extends AnySchema | undefined = undefined,
>(def: RouteDef<Name, M, Path, A, P, Q, B, R>): RouteDef<Name, M, Path, A, P, Q, B, R> {
  return def
}

/**
 * Handlers for some of the contract's routes, by route name: each handler's input and
 * output types come from its route's declaration. Names the contract does not declare are
 * an error.
 *
 * @example
 * ```ts
 * export const taskHandlers = defineHandlers({
 *   'tasks.get': ({ caller, params, services }) => services.tasks.get(caller.id, params.id),
 * })
 * ```
 */
export function defineHandlers<const H extends Partial<HandlerMap>>(
  handlers: H & Record<Exclude<keyof H, keyof HandlerMap>, never>,
): H {
  return handlers
}

/**
 * Join a table of declarations with its handlers, in the table's order. The compiler checks
 * that every declared route has a handler typed by its schemas; a handler for a name the
 * table does not declare is an error here, when the table is built.
 *
 * @example
 * ```ts
 * const mounted = attachHandlers(routes, {
 *   'tasks.get': ({ caller, params, services }) => services.tasks.get(caller.id, params.id),
 *   // ... one per route
 * })
 * ```
 */
export function attachHandlers<const T extends readonly AnyDeclaration[]>(table: T, handlers: Handlers<T>): AnyRoute[] {
  const byName = handlers as Record<string, AnyRoute['handle'] | undefined>
  const names = new Set(table.map((route) => route.name))
  for (const name of Object.keys(byName)) if (!names.has(name)) throw new Error(`handler for undeclared route ${name}`)
  return table.map((route) => {
    const handle = byName[route.name]
    if (!handle) throw new Error(`route ${route.name} has no handler`)
    return { ...route, handle }
  })
}
