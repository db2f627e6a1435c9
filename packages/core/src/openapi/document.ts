/**
 * The OpenAPI 3.1 document, generated from the route table: every route becomes one
 * operation, its valibot schemas become JSON Schema (draft 2020-12, which is OpenAPI 3.1's
 * schema dialect) and the error responses follow from the route's auth level and inputs,
 * exactly as the pipeline answers them.
 */
import type { AnyRoute, HttpMethod } from '../route.js'
import { ErrorBodySchema } from '@berth/contract'
import { parameters, requestBody, toOpenApiPath } from './paths.js'
import { HEADERS, errorModelText, errorResponses, successResponse } from './responses.js'
import { createConverter, defaultSchemaComponents, type Converter } from './schemas.js'
import type { OpenApiDocument, OpenApiInfo, OpenApiOperation, OpenApiOptions } from './types.js'

/** One route as an operation: its parameters, request body, success and error responses. */
function operation(route: AnyRoute, converter: Converter): OpenApiOperation {
  const params = parameters(route, converter)
  const body = requestBody(route, converter)
  return {
    operationId: route.name,
    tags: [route.tag],
    summary: route.summary,
    ...(route.description && { description: route.description }),
    security: route.auth === 'public' ? [] : [{ bearerAuth: [] }],
    ...(params.length > 0 && { parameters: params }),
    ...(body && { requestBody: body }),
    responses: {
      ...(route.upgrade && {
        '101': {
          description: `Switching Protocols: the connection becomes a ${route.upgrade} (send \`Upgrade: ${route.upgrade}\`)`,
        },
      }),
      [String(route.status ?? 200)]: successResponse(route, converter.convert),
      ...errorResponses(route),
    },
    // OpenAPI has no words for the messages of an upgraded connection: an extension carries
    // them, converted from the same schemas the server parses and the client types with.
    ...(route.messages && {
      'x-websocket': {
        client_messages: converter.convert(route.messages.client, 'input'),
        server_messages: converter.convert(route.messages.server, 'output'),
      },
    }),
  }
}

/**
 * Build the OpenAPI 3.1.0 document of a route table: one operation per route (operationId =
 * route name), parameters, request bodies and success responses from the valibot schemas,
 * the error responses each route can give (all with the shared `ErrorBody` schema), bearer
 * security on authenticated routes and named schemas under `components.schemas`.
 * Throws when a route cannot be described faithfully (a schema JSON Schema cannot express,
 * a param missing from the path, a duplicate operation).
 *
 * @example
 * ```ts
 * import { buildOpenApi, routes } from '@berth/core'
 * const doc = buildOpenApi(routes, { title: 'Berth', version: '1.0.0' })
 * doc.paths['/v1/profiles/{id}'].get.operationId // 'profiles.get'
 * ```
 */
export function buildOpenApi(
  routes: readonly AnyRoute[],
  info: OpenApiInfo,
  options: OpenApiOptions = {},
): OpenApiDocument {
  const named = { ...(options.schemas ?? defaultSchemaComponents()), ErrorBody: ErrorBodySchema }
  const converter = createConverter(named)
  const paths: OpenApiDocument['paths'] = {}
  const operationIds = new Set<string>()
  const tags: string[] = []
  for (const route of routes) {
    const path = toOpenApiPath(route.path)
    const method = route.method.toLowerCase() as Lowercase<HttpMethod>
    if (operationIds.has(route.name)) throw new Error(`OpenAPI: duplicate route name ${route.name}`)
    if (paths[path]?.[method]) throw new Error(`OpenAPI: duplicate route ${route.method} ${route.path}`)
    operationIds.add(route.name)
    if (!tags.includes(route.tag)) tags.push(route.tag)
    let op: OpenApiOperation
    try {
      op = operation(route, converter)
    } catch (err) {
      throw new Error(
        `OpenAPI: cannot describe route ${route.name} (${route.method} ${route.path}): ${(err as Error).message}`,
      )
    }
    paths[path] = { ...paths[path], [method]: op }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: info.title,
      version: info.version,
      description: [info.description, errorModelText()].filter(Boolean).join('\n\n'),
    },
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      schemas: converter.components,
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'A caller key (issued by `POST /admin/users` or `POST /admin/users/{id}/keys`), or the operator token for admin routes.',
        },
      },
      headers: HEADERS,
    },
  }
}
