import * as v from 'valibot'
import type { ErrorCode } from '../errors.js'
import type { IdKind } from '../ids.js'
import { defineRoute } from '../route.js'
import { IdParams, ListOf, PageQuery } from '../schemas/common.js'

type StrictObj = v.StrictObjectSchema<v.ObjectEntries, undefined>

/**
 * The five routes of a resource with the standard surface: `GET/POST <base>` and
 * `GET/PATCH/DELETE <base>/:id`, named `<area>.list|create|get|update|delete`. Everything
 * is owned by the caller: another caller's id is a 404. The server attaches the handlers.
 *
 * @example
 * ```ts
 * export const toolRoutes = crudRoutes({
 *   area: 'tools', base: '/v1/tools', idKind: 'tool', label: 'tool',
 *   item: Tool, create: CreateTool, update: UpdateTool,
 * })
 * ```
 */
export function crudRoutes<
  const Area extends string,
  const Base extends string,
  Item extends v.GenericSchema,
  Create extends StrictObj,
  Update extends v.GenericSchema,
  ListItem extends v.GenericSchema = Item,
  Filter extends v.ObjectEntries = Record<never, never>,
>(def: {
  area: Area
  base: Base
  idKind: IdKind
  /** Singular noun for summaries, e.g. `tool`. */
  label: string
  item: Item
  /** List item schema when it differs from the full item (e.g. profiles without claude_md). */
  listItem?: ListItem
  create: Create
  update: Update
  /** Extra list filters (query parameters). */
  filters?: Filter
  /** Extra words for the create summary (rules a caller should know). */
  createNote?: string
  /** Error codes beyond the usual ones, per operation (e.g. 409 on delete). */
  errors?: { update?: ErrorCode[]; delete?: ErrorCode[] }
}) {
  const params = IdParams(def.idKind)
  const listItem = (def.listItem ?? def.item) as ListItem
  const query = v.object({ ...PageQuery, ...(def.filters ?? ({} as Filter)) })
  const plural = def.area
  return [
    defineRoute({
      name: `${def.area}.list` as `${Area}.list`,
      method: 'GET',
      path: def.base,
      auth: 'caller',
      tag: def.area,
      summary: `List your ${plural}`,
      query,
      response: ListOf(plural, listItem),
    }),
    defineRoute({
      name: `${def.area}.create` as `${Area}.create`,
      method: 'POST',
      path: def.base,
      auth: 'caller',
      tag: def.area,
      summary: `Create a ${def.label}`,
      description: def.createNote,
      body: def.create,
      response: def.item,
      status: 201,
    }),
    defineRoute({
      name: `${def.area}.get` as `${Area}.get`,
      method: 'GET',
      path: `${def.base}/:id` as `${Base}/:id`,
      auth: 'caller',
      tag: def.area,
      summary: `Read one ${def.label}`,
      params,
      response: def.item,
    }),
    defineRoute({
      name: `${def.area}.update` as `${Area}.update`,
      method: 'PATCH',
      path: `${def.base}/:id` as `${Base}/:id`,
      auth: 'caller',
      tag: def.area,
      summary: `Update a ${def.label}`,
      params,
      body: def.update,
      response: def.item,
      errors: def.errors?.update,
    }),
    defineRoute({
      name: `${def.area}.delete` as `${Area}.delete`,
      method: 'DELETE',
      path: `${def.base}/:id` as `${Base}/:id`,
      auth: 'caller',
      tag: def.area,
      summary: `Delete a ${def.label}`,
      params,
      status: 204,
      errors: def.errors?.delete,
    }),
  ] as const
}
