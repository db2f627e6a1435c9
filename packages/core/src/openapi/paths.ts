/** The request side of an operation: the path in OpenAPI form, its path and query parameters, and the request body. */
import type { JsonSchema } from '@valibot/to-json-schema'
import type { AnyRoute } from '../route.js'
import { ANY_VALUE_DESCRIPTION, SCHEMA_REF, type Converter } from './schemas.js'
import type { OpenApiOperation, OpenApiParameter, OpenApiSchema } from './types.js'

/**
 * `/v1/profiles/:id` → `/v1/profiles/{id}`.
 *
 * @example
 * ```ts
 * toOpenApiPath('/v1/profiles/:id/models') // '/v1/profiles/{id}/models'
 * ```
 */
export function toOpenApiPath(path: string): string {
  return path.replace(/:(\w+)/g, '{$1}')
}

/** The path parameter names of an h3 path, in order. */
export function pathParamNames(path: string): string[] {
  return [...path.matchAll(/:(\w+)/g)].map((m) => m[1]!)
}

/** The object JSON Schema of a params or query schema (resolving a named one). */
function objectOf(
  json: JsonSchema,
  components: Record<string, JsonSchema>,
  what: string,
): { properties: Record<string, JsonSchema>; required: string[] } {
  const resolved = json.$ref?.startsWith(SCHEMA_REF) ? components[json.$ref.slice(SCHEMA_REF.length)] : json
  if (resolved?.type !== 'object') throw new Error(`${what} must be an object schema`)
  return { properties: (resolved.properties ?? {}) as Record<string, JsonSchema>, required: resolved.required ?? [] }
}

function isArraySchema(s: JsonSchema): boolean {
  return (
    s.type === 'array' || (Array.isArray(s.anyOf) && s.anyOf.some((x) => typeof x === 'object' && x.type === 'array'))
  )
}

/** The path and query parameters of a route, from its path and its params and query schemas. */
export function parameters(route: AnyRoute, { convert, components }: Converter): OpenApiParameter[] {
  const names = pathParamNames(route.path)
  const p = route.params
    ? objectOf(convert(route.params, 'input'), components, 'params')
    : { properties: {}, required: [] }
  const stray = Object.keys(p.properties).filter((k) => !names.includes(k))
  if (stray.length) throw new Error(`params ${stray.join(', ')} are not in the path`)
  const out: OpenApiParameter[] = names.map((name) => {
    const schema = p.properties[name] ?? { type: 'string' }
    return { name, in: 'path', required: true, ...(schema.description && { description: schema.description }), schema }
  })
  if (route.query) {
    const q = objectOf(convert(route.query, 'input'), components, 'query')
    for (const [name, schema] of Object.entries(q.properties)) {
      out.push({
        name,
        in: 'query',
        required: q.required.includes(name),
        ...(schema.description && { description: schema.description }),
        schema,
        // Repeated keys (`?path=a&path=b`) are how the server reads arrays.
        ...(isArraySchema(schema) && { style: 'form' as const, explode: true }),
      })
    }
  }
  return out
}

/** The request body: JSON from the body schema, any JSON a handler reads itself, or the form of a multipart route. */
export function requestBody(route: AnyRoute, converter: Converter): OpenApiOperation['requestBody'] {
  if (route.body)
    return {
      required: route.bodyOptional !== true,
      content: { 'application/json': { schema: converter.convert(route.body, 'input') } },
    }
  if (route.rawBody)
    return {
      required: false,
      description: route.rawBody,
      content: { 'application/json': { schema: { description: ANY_VALUE_DESCRIPTION } } },
    }
  if (!route.multipart) return undefined
  const { fields, files } = route.multipart
  const properties: Record<string, OpenApiSchema> = {}
  for (const [name, description] of Object.entries(fields)) properties[name] = { type: 'string', description }
  // Binary parts: `contentMediaType` is OpenAPI 3.1's way, `format: binary` what upload UIs look for.
  properties.files = {
    type: 'array',
    description: files,
    items: { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream' },
  }
  return {
    required: true,
    content: {
      'multipart/form-data': { schema: { type: 'object', properties, required: [...Object.keys(fields), 'files'] } },
    },
  }
}
