import type * as v from 'valibot'
import type { Routes } from '@berth/contract'
import type { Page, Paged } from '../records/collection.js'
import type { Services } from '../services.js'
import type { HandlerMap, RouteContext } from '../route.js'
import { listPage, type ListQuery } from './paging.js'

/** The service surface a CRUD resource exposes to its routes. */
export interface CrudService<V, LV, C, U, F> {
  create(owner: string, input: C): Promise<V>
  get(owner: string, id: string): Promise<V>
  list(owner: string, page: Page, filter: F): Promise<Paged<LV>>
  update(owner: string, id: string, input: U): Promise<V>
  remove(owner: string, id: string): Promise<void>
}

type Name = Routes[number]['name']
type Route<N> = Extract<Routes[number], { name: N }>
type Out<S> = S extends v.GenericSchema ? v.InferOutput<S> : never
type Operation = 'list' | 'create' | 'get' | 'update' | 'delete'
type Deletable<N> = N extends `${infer A}.delete` ? A : never
type WithAll<A> = A extends string ? ([`${A}.${Operation}`] extends [Name] ? A : never) : never
/** Areas with all five operations, as `crudRoutes` declares them. */
type CrudArea = WithAll<Deletable<Name>>
type ListOut<A extends string> = Out<Route<`${A}.list`>['response']>
type ListItem<A extends string> = ListOut<A>[Exclude<
  keyof ListOut<A>,
  'total' | 'next_cursor'
>] extends readonly (infer I)[]
  ? I
  : never

/** The service of a CRUD area, typed by the area's declared schemas. */
export type CrudServiceOf<A extends string> = CrudService<
  Out<Route<`${A}.get`>['response']>,
  ListItem<A>,
  Out<Route<`${A}.create`>['body']>,
  Out<Route<`${A}.update`>['body']>,
  Omit<Out<Route<`${A}.list`>['query']>, 'page' | 'limit' | 'cursor'>
>

type Ctx = RouteContext<{ id: string }, ListQuery & Record<string, unknown>, never, 'caller'>

/**
 * The handlers of the five routes `crudRoutes` declares for `area`
 * (`<area>.list|create|get|update|delete`), each one call into the area's service (the
 * audit log records the changes of the areas `audited.ts` lists).
 */
export function crudHandlers<const A extends CrudArea>(
  area: A,
  service: (s: Services) => CrudServiceOf<A>,
): Pick<HandlerMap, `${A}.${Operation}`> {
  const handlers = {
    [`${area}.list`]: (ctx: Ctx) =>
      listPage(`${area}.list`, area, ctx, (page, filter) =>
        service(ctx.services).list(ctx.caller.id, page, filter as never),
      ),
    [`${area}.create`]: ({ caller, body, services }: Ctx) => service(services).create(caller.id, body),
    [`${area}.get`]: ({ caller, params, services }: Ctx) => service(services).get(caller.id, params.id),
    [`${area}.update`]: ({ caller, params, body, services }: Ctx) =>
      service(services).update(caller.id, params.id, body),
    [`${area}.delete`]: ({ caller, params, services }: Ctx) => service(services).remove(caller.id, params.id),
  }
  // The keys are built from `area`: the compiler cannot follow them, the declared types above hold.
  return handlers as unknown as Pick<HandlerMap, `${A}.${Operation}`>
}
