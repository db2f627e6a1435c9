/**
 * The OpenAPI 3.1 document, generated from the route table: every route becomes one
 * operation, its valibot schemas become JSON Schema (draft 2020-12, which is OpenAPI 3.1's
 * schema dialect) and the error responses follow from the route's auth level and inputs,
 * exactly as the pipeline answers them.
 */
import type * as v from 'valibot'
import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema, type OverrideActionContext } from '@valibot/to-json-schema'
import { ERROR_STATUS, type ErrorCode } from './errors.js'
import type { AnyRoute, HttpMethod } from './route.js'
import * as schemaExports from './schemas/index.js'

/** A JSON Schema as it appears in the document. */
export type OpenApiSchema = JsonSchema

export interface OpenApiParameter {
  name: string
  in: 'path' | 'query'
  required: boolean
  description?: string
  schema: OpenApiSchema
  style?: 'form' | 'simple'
  explode?: boolean
}

export interface OpenApiMediaType {
  schema?: OpenApiSchema
  examples?: Record<string, { summary?: string; value: unknown }>
}

export interface OpenApiResponse {
  description: string
  headers?: Record<string, { $ref: string } | { description: string; schema: OpenApiSchema }>
  content?: Record<string, OpenApiMediaType>
}

export interface OpenApiOperation {
  operationId: string
  tags: string[]
  summary: string
  description?: string
  security: Array<Record<string, string[]>>
  parameters?: OpenApiParameter[]
  requestBody?: { required: true; content: Record<string, OpenApiMediaType> }
  responses: Record<string, OpenApiResponse>
}

/** An OpenAPI 3.1.0 document as {@link buildOpenApi} produces it. */
export interface OpenApiDocument {
  openapi: '3.1.0'
  info: { title: string; version: string; description: string }
  tags: Array<{ name: string }>
  paths: Record<string, Partial<Record<Lowercase<HttpMethod>, OpenApiOperation>>>
  components: {
    schemas: Record<string, OpenApiSchema>
    securitySchemes: Record<string, { type: 'http'; scheme: 'bearer'; description: string }>
    headers: Record<string, { description: string; schema: OpenApiSchema }>
  }
}

/** `title` and `version` of the document; `description` is put before the error model text. */
export interface OpenApiInfo {
  title: string
  version: string
  description?: string
}

export interface OpenApiOptions {
  /**
   * Named schemas to publish under `components.schemas` and reference with `$ref` wherever a
   * route uses that very schema object. Default: every object, variant and enum schema
   * exported by core's `schemas/` (`ErrorBodySchema` is published as `ErrorBody`).
   */
  schemas?: Record<string, v.GenericSchema>
}

const SCHEMA_REF = '#/components/schemas/'
/** Marks `v.unknown()`/`v.any()`: an intended "any value", never a silently lost type. */
export const ANY_VALUE_DESCRIPTION = 'Any JSON value.'

/** Types worth a name of their own in `components.schemas` (primitives stay inline). */
const NAMED_TYPES = new Set(['object', 'strict_object', 'loose_object', 'object_with_rest', 'variant', 'picklist', 'enum'])

/**
 * The named schemas core exports: each object, variant or enum schema of `schemas/`, under
 * its export name without a `Schema` suffix.
 *
 * @example
 * ```ts
 * defaultSchemaComponents().Profile === Profile // true
 * ```
 */
export function defaultSchemaComponents(): Record<string, v.GenericSchema> {
  const out: Record<string, v.GenericSchema> = {}
  const seen = new Set<unknown>()
  for (const [name, value] of Object.entries(schemaExports).sort(([a], [b]) => a.localeCompare(b))) {
    const s = value as Partial<v.GenericSchema> | null
    if (typeof s !== 'object' || s === null || s.kind !== 'schema' || !NAMED_TYPES.has(s.type ?? '') || seen.has(s)) continue
    seen.add(s)
    out[name.replace(/Schema$/, '')] = s as v.GenericSchema
  }
  return out
}

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
function pathParamNames(path: string): string[] {
  return [...path.matchAll(/:(\w+)/g)].map((m) => m[1]!)
}

function describe(schema: JsonSchema, text: string): JsonSchema {
  return { ...schema, description: schema.description ? `${schema.description} ${text}` : text }
}

/**
 * Actions JSON Schema cannot state exactly. Each is handled on purpose (no `errorMode:
 * 'ignore'`), so an action nobody thought about still fails the build loudly.
 */
function overrideAction({ valibotAction: action, jsonSchema, errors }: OverrideActionContext): JsonSchema | undefined {
  switch (action.type) {
    // Trimming happens before the length checks; the schema of the trimmed value is the same.
    case 'trim':
    case 'trim_start':
    case 'trim_end':
      return jsonSchema
    case 'check': {
      const message = (action as { message?: unknown }).message
      return describe(jsonSchema, typeof message === 'string' ? `Also checked: ${message}.` : 'Also checked by the server.')
    }
    case 'regex': {
      if (!errors) return undefined
      const re = (action as unknown as { requirement: RegExp }).requirement
      // The converter sets `pattern` only when none was there, and reports a clash otherwise.
      const hadPattern = errors.some((e) => e.includes('combination'))
      const out = { ...jsonSchema }
      if (/[imsv]/.test(re.flags)) {
        // Flags change the meaning; say it in words rather than publish a wrong pattern.
        if (!hadPattern) delete out.pattern
        return describe(out, `Must match /${re.source}/${re.flags}.`)
      }
      if (hadPattern) out.allOf = [...(out.allOf ?? []), { pattern: re.source }]
      return out
    }
    default:
      return undefined
  }
}

/** `v.unknown()` and `v.any()` carry a description, so an untyped `{}` is always a bug. */
function overrideSchema({ valibotSchema, jsonSchema }: { valibotSchema: { type: string }; jsonSchema: JsonSchema }): JsonSchema | undefined {
  if (valibotSchema.type === 'unknown' || valibotSchema.type === 'any') return { ...jsonSchema, description: ANY_VALUE_DESCRIPTION }
  return undefined
}

/** Drop what a standalone JSON Schema carries but an embedded one must not, and empty `required`. */
function tidy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(tidy)
  if (typeof schema !== 'object' || schema === null) return schema
  const out: Record<string, unknown> = {}
  for (const [k, val] of Object.entries(schema)) {
    if (k === '$schema' || k === '$defs') continue
    if (k === 'required' && Array.isArray(val) && val.length === 0) continue
    out[k] = tidy(val)
  }
  return out
}

type Mode = 'input' | 'output'

/**
 * valibot → JSON Schema with named schemas as `$ref`s into `components.schemas`. Requests
 * convert in `input` mode, responses in `output` mode; a named schema whose two forms differ
 * (a type-changing pipe) is published twice, the request form as `<Name>Input`.
 */
function createConverter(named: Record<string, v.GenericSchema>) {
  const names = Object.keys(named)
  let inputVariants = new Set<string>()

  const config = (mode: Mode): ConversionConfig => ({
    target: 'draft-2020-12',
    typeMode: mode,
    errorMode: 'throw',
    definitions: named,
    overrideAction,
    overrideSchema,
    overrideRef: ({ referenceId }) => {
      if (!(referenceId in named)) {
        throw new Error(`a recursive (lazy) schema needs a name: add it to the named schemas (got "${referenceId}")`)
      }
      return `${SCHEMA_REF}${mode === 'input' && inputVariants.has(referenceId) ? `${referenceId}Input` : referenceId}`
    },
  })

  const defs = (mode: Mode): Record<string, JsonSchema> => {
    const { definitions: _d, ...rest } = config(mode)
    return toJsonSchemaDefs(named, rest)
  }

  // A named schema differs between modes when its own pipes do or when it refers to one that
  // does; iterate until the set stops growing (at most once per name).
  let output = defs('output')
  let input = defs('input')
  for (let i = 0; i <= names.length; i++) {
    const differ = new Set(names.filter((n) => JSON.stringify(input[n]) !== JSON.stringify(output[n])))
    if (differ.size === inputVariants.size) break
    inputVariants = differ
    output = defs('output')
    input = defs('input')
  }

  const components: Record<string, JsonSchema> = {}
  for (const n of names) components[n] = tidy(output[n]) as JsonSchema
  for (const n of inputVariants) {
    if (`${n}Input` in named) throw new Error(`schema name clash: ${n}Input`)
    components[`${n}Input`] = tidy(input[n]) as JsonSchema
  }

  return {
    components,
    convert(schema: v.GenericSchema, mode: Mode): JsonSchema {
      return tidy(toJsonSchema(schema as Parameters<typeof toJsonSchema>[0], config(mode))) as JsonSchema
    },
  }
}

type Converter = ReturnType<typeof createConverter>

/** Short wording per error code, used in response descriptions and examples. */
const CODE_TEXT: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: 'Missing or invalid credentials: send Authorization: Bearer <key>',
  FORBIDDEN: 'This operation requires an admin caller',
  NOT_FOUND: 'Not found (also for another caller\'s resource)',
  VALIDATION_FAILED: 'Invalid input: details.issues lists every problem',
  PAYLOAD_TOO_LARGE: 'Request body exceeds the configured limit',
  RATE_LIMITED: 'Rate limit exceeded: retry after Retry-After seconds',
  CONCURRENCY_LIMIT: 'The profile runs as many workspaces as it may: details.limit, details.running',
  INTERNAL_ERROR: 'Internal server error',
}

const EXAMPLE_DETAILS: Partial<Record<ErrorCode, Record<string, unknown>>> = {
  VALIDATION_FAILED: { issues: [{ location: 'body', path: 'name', message: 'must not be empty' }] },
  PAYLOAD_TOO_LARGE: { limit: 1048576 },
  RATE_LIMITED: { limit: 10, retry_after: 6 },
  CONCURRENCY_LIMIT: { limit: 5, running: 5 },
}

const RATE_HEADERS = ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const

const HEADERS: OpenApiDocument['components']['headers'] = {
  'Retry-After': { description: 'Seconds until a request will be accepted again.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': {
    description: 'The bucket, as in the IETF RateLimit header fields draft: `<burst>;w=<seconds to refill>;burst=<burst>;rpm=<tokens per minute>`, e.g. `10;w=10;burst=10;rpm=60`.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': { description: "The caller's bucket capacity (burst).", schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Remaining': { description: 'Requests left in the bucket now.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Reset': { description: 'Seconds until the bucket is full again.', schema: { type: 'integer', minimum: 0 } },
}

const headerRefs = (names: readonly string[]) => Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]))

/** The error codes a route can answer with, from its auth level and inputs plus its own. */
function errorCodes(route: AnyRoute): ErrorCode[] {
  const codes: ErrorCode[] = []
  if (route.auth !== 'public') codes.push('UNAUTHORIZED')
  if (route.auth === 'admin') codes.push('FORBIDDEN')
  if (route.auth !== 'public' && !route.unlimited) codes.push('RATE_LIMITED')
  const hasPathParams = pathParamNames(route.path).length > 0
  // A path parameter that is not valid percent-encoding is refused before any handler runs.
  if (route.params || route.query || route.body || hasPathParams) codes.push('VALIDATION_FAILED')
  if (hasPathParams) codes.push('NOT_FOUND')
  if (route.body) codes.push('PAYLOAD_TOO_LARGE')
  codes.push('INTERNAL_ERROR')
  return [...new Set([...codes, ...(route.errors ?? [])])]
}

function errorResponses(route: AnyRoute): Record<string, OpenApiResponse> {
  // The pipeline adds RateLimit-* to every answer of a route that takes a token (a failed
  // authentication takes one of the client address's).
  const limited = route.auth !== 'public' && !route.unlimited
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of errorCodes(route)) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code])
  const out: Record<string, OpenApiResponse> = {}
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const retry = codes.includes('RATE_LIMITED') || codes.includes('CONCURRENCY_LIMIT')
    const headers = limited || route.auth !== 'public' ? headerRefs(retry ? ['Retry-After', ...RATE_HEADERS] : RATE_HEADERS) : undefined
    out[String(status)] = {
      description: codes.map((c) => `${c}: ${CODE_TEXT[c] ?? c.toLowerCase().replace(/_/g, ' ')}`).join('; '),
      ...(headers && { headers }),
      content: {
        'application/json': {
          schema: { $ref: `${SCHEMA_REF}ErrorBody` },
          examples: Object.fromEntries(
            codes.map((code) => [
              code,
              {
                value: {
                  error: CODE_TEXT[code] ?? code,
                  code,
                  ...(EXAMPLE_DETAILS[code] && { details: EXAMPLE_DETAILS[code] }),
                },
              },
            ]),
          ),
        },
      },
    }
  }
  // Node answers these before Berth sees the request, without a JSON body.
  out['431'] = { description: 'Request header fields too large (answered by the HTTP server, no body)' }
  return out
}

const SUCCESS_TEXT: Record<number, string> = { 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No content', 302: 'Redirect' }

function isJsonType(type: string): boolean {
  return /^application\/([\w.+-]+\+)?json\b/i.test(type)
}

function successResponse(route: AnyRoute, convert: Converter['convert']): OpenApiResponse {
  const status = route.status ?? 200
  const limited = route.auth !== 'public' && !route.unlimited
  const res: OpenApiResponse = { description: SUCCESS_TEXT[status] ?? 'Success', ...(limited && { headers: headerRefs(RATE_HEADERS) }) }
  if (status === 302) {
    res.headers = { ...res.headers, Location: { description: 'Where to go next.', schema: { type: 'string', format: 'uri-reference' } } }
    return res
  }
  if (status === 204) return res
  const type = route.produces ?? (route.response ? 'application/json' : undefined)
  if (!type) return res
  if (route.response) res.content = { [type]: { schema: convert(route.response, 'output') } }
  else if (/^text\//i.test(type)) res.content = { [type]: { schema: { type: 'string' } } }
  // Binary content: OpenAPI 3.1 describes raw bytes by the media type alone, without a schema.
  else res.content = { [type]: isJsonType(type) ? { schema: { type: 'object', description: ANY_VALUE_DESCRIPTION } } : {} }
  return res
}

/** The object JSON Schema of a params or query schema (resolving a named one). */
function objectOf(json: JsonSchema, components: Record<string, JsonSchema>, what: string): { properties: Record<string, JsonSchema>; required: string[] } {
  const resolved = json.$ref?.startsWith(SCHEMA_REF) ? components[json.$ref.slice(SCHEMA_REF.length)] : json
  if (!resolved || resolved.type !== 'object') throw new Error(`${what} must be an object schema`)
  return { properties: (resolved.properties ?? {}) as Record<string, JsonSchema>, required: resolved.required ?? [] }
}

function isArraySchema(s: JsonSchema): boolean {
  return s.type === 'array' || (Array.isArray(s.anyOf) && s.anyOf.some((x) => typeof x === 'object' && x.type === 'array'))
}

function parameters(route: AnyRoute, { convert, components }: Converter): OpenApiParameter[] {
  const names = pathParamNames(route.path)
  const p = route.params ? objectOf(convert(route.params, 'input'), components, 'params') : { properties: {}, required: [] }
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

/** The request body: JSON from the body schema, or the form of a multipart route. */
function requestBody(route: AnyRoute, converter: Converter): OpenApiOperation['requestBody'] {
  if (route.body) return { required: true, content: { 'application/json': { schema: converter.convert(route.body, 'input') } } }
  if (!route.multipart) return undefined
  const { fields, files } = route.multipart
  const properties: Record<string, OpenApiSchema> = {}
  for (const [name, description] of Object.entries(fields)) properties[name] = { type: 'string', description }
  // Binary parts: `contentMediaType` is OpenAPI 3.1's way, `format: binary` what upload UIs look for.
  properties.files = { type: 'array', description: files, items: { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream' } }
  return { required: true, content: { 'multipart/form-data': { schema: { type: 'object', properties, required: [...Object.keys(fields), 'files'] } } } }
}

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
      ...(route.upgrade && { '101': { description: `Switching Protocols: the connection becomes a ${route.upgrade} (send \`Upgrade: ${route.upgrade}\`)` } }),
      [String(route.status ?? 200)]: successResponse(route, converter.convert),
      ...errorResponses(route),
    },
  }
}

/** The error model, as the document's description states it. */
function errorModelText(): string {
  const rows = Object.entries(ERROR_STATUS).map(([code, status]) => `| \`${code}\` | ${status} |`)
  return [
    '## Authentication',
    'Send `Authorization: Bearer <caller key>` (keys are issued by the admin API and shown once). Routes marked with the lock need it; admin routes need a caller with role `admin` or the operator token.',
    '',
    '## Errors',
    'Every error response has the body `{ error, code, details? }` (schema `ErrorBody`): `error` is a human-readable message, `code` a stable machine-readable code, `details` optional structured data (e.g. `details.issues` of VALIDATION_FAILED: `{ location, path, message }` per problem). The status follows from the code:',
    '',
    '| code | status |',
    '|---|---|',
    ...rows,
    '',
    "Two codes extend the service spec's error table so that these answers keep the same shape: `METHOD_NOT_ALLOWED` (405, the path exists but not with this method; the `Allow` header lists the methods) and `PAYLOAD_TOO_LARGE` (413, the body exceeds the configured limit, 1 MiB by default). An unknown route is 404 `NOT_FOUND`; another caller's resource is 404 too, never 403. Malformed JSON is 400 `VALIDATION_FAILED`. Nothing a caller sends should produce a 500.",
    '',
    '## Rate limits',
    'Authenticated routes share a token bucket per caller. Their responses carry `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`; an empty bucket answers 429 `RATE_LIMITED` with `Retry-After` (seconds).',
    '',
    '## Idempotency',
    '`Idempotency-Key` is not honoured: the header is ignored, so a retried POST may create a second resource. List before retrying a create whose response was lost.',
  ].join('\n')
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
export function buildOpenApi(routes: readonly AnyRoute[], info: OpenApiInfo, options: OpenApiOptions = {}): OpenApiDocument {
  const named = { ...(options.schemas ?? defaultSchemaComponents()), ErrorBody: schemaExports.ErrorBodySchema }
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
      throw new Error(`OpenAPI: cannot describe route ${route.name} (${route.method} ${route.path}): ${(err as Error).message}`)
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
          description: 'A caller key (issued by `POST /admin/users` or `POST /admin/users/{id}/keys`), or the operator token for admin routes.',
        },
      },
      headers: HEADERS,
    },
  }
}
