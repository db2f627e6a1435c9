import type { RawInput } from './internal/transport.js'
import type { CallOptions, RouteArgs, RouteName, RouteOutput } from './types.js'

/** Every list operation: its answer is `{ <items>, total, next_cursor }`. */
export type ListRouteName = {
  [N in RouteName]: RouteOutput<N> extends { next_cursor: string | null } ? N : never
}[RouteName]

/** The item type of a list operation, e.g. `Task` for `'tasks.list'`. */
export type ListItem<N extends ListRouteName> = RouteOutput<N>[Exclude<
  keyof RouteOutput<N>,
  'total' | 'next_cursor'
>] extends readonly (infer I)[]
  ? I
  : never

type Call = (name: string, input?: RawInput, opts?: CallOptions) => Promise<unknown>

/**
 * Every item of a list, page after page, following each answer's `next_cursor` until it is
 * null: each page is read from where the last one ended (no item twice, none skipped,
 * whatever the depth). A `page` in the query is ignored; a `cursor` starts from there.
 */
export async function* paginateList(call: Call, name: string, input: RawInput = {}, options?: CallOptions) {
  const { page: _page, cursor: start, ...query } = input.query ?? {}
  let cursor = start as string | undefined
  do {
    const answer = (await call(
      name,
      { ...input, query: cursor === undefined ? query : { ...query, cursor } },
      options,
    )) as Record<string, unknown>
    const items = Object.entries(answer).find(([k, v]) => k !== 'total' && Array.isArray(v))?.[1] as unknown[]
    yield* items ?? []
    cursor = (answer.next_cursor as string | null) ?? undefined
  } while (cursor !== undefined)
}

/** `client.paginate`: the typed form of {@link paginateList}. */
export type Paginate = <N extends ListRouteName>(name: N, ...args: RouteArgs<N>) => AsyncIterable<ListItem<N>>
