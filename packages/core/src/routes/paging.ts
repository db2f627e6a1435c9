import { validationError } from '@berth/contract'
import type { Page, Paged } from '../records/collection.js'
import type { Services } from '../services.js'

/** The query every list route takes (`PageQuery`), with its filters. */
export type ListQuery = { page?: number | undefined; limit: number; cursor?: string | undefined }

/** What a list handler hands to {@link listPage}: its route context. */
export interface ListContext<Q extends ListQuery> {
  caller: { id: string } | null
  params?: unknown
  query: Q
  services: Services
}

/** A list response: `{ <key>: items, total, next_cursor }`. */
export type ListBody<K extends string, T> = { [P in K]: T[] } & { total: number; next_cursor: string | null }

/**
 * The one way a list route pages: reads `page` or `cursor` from the query (both: 400),
 * checks that a cursor is this list's (route, path parameters, filters, caller; else 400),
 * calls `read` with the page and the filters, and answers `{ <key>, total, next_cursor }`.
 */
export async function listPage<K extends string, Q extends ListQuery, T>(
  list: string,
  key: K,
  ctx: ListContext<Q>,
  read: (page: Page, filter: Omit<Q, keyof ListQuery>) => Promise<Paged<T>>,
): Promise<ListBody<K, T>> {
  const { page, limit, cursor, ...filter } = ctx.query
  if (page !== undefined && cursor !== undefined)
    throw validationError([{ location: 'query', path: 'cursor', message: 'pass either page or cursor, not both' }])
  const scope = {
    list,
    caller: ctx.caller?.id ?? '',
    filter: { ...filter, ...(ctx.params as Record<string, unknown> | undefined) },
  }
  const cursors = ctx.services.cursors
  const at: Page = cursor === undefined ? { page: page ?? 1, limit } : { limit, after: cursors.decode(scope, cursor) }
  const result = await read(at, filter)
  return {
    [key]: result.items,
    total: result.total,
    next_cursor: result.next === null ? null : cursors.encode(scope, result.next),
  } as ListBody<K, T>
}
