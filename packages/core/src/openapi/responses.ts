/** The response side of an operation: its success response, the error responses its auth level and inputs imply, and the error model text. */
import { ERROR_STATUS, type ErrorCode } from '@berth/contract'
import type { AnyRoute } from '../route.js'
import { ANY_VALUE_DESCRIPTION, SCHEMA_REF, type Converter } from './schemas.js'
import type { OpenApiDocument, OpenApiResponse } from './types.js'

/** Short wording per error code, used in response descriptions and examples. */
const CODE_TEXT: Partial<Record<ErrorCode, string>> = {
  UNAUTHORIZED: 'Missing or invalid credentials: send Authorization: Bearer <key>',
  FORBIDDEN: 'This operation requires an admin caller',
  NOT_FOUND: "Not found (also for another caller's resource)",
  VALIDATION_FAILED:
    'Invalid input (a field, a path with an empty or dot segment, a body this operation does not take): details.issues lists every problem',
  PAYLOAD_TOO_LARGE: 'Request body exceeds the configured limit',
  UNSUPPORTED_MEDIA_TYPE: 'The body is not sent with the content type this operation takes (details.expected)',
  RATE_LIMITED: 'Rate limit exceeded: retry after Retry-After seconds',
  CONCURRENCY_LIMIT: 'The profile runs as many workspaces as it may: details.limit, details.running',
  BUDGET_EXCEEDED:
    "The caller's or the profile's monthly spending limit is spent: details.scope, limit, spent, resets_at",
  INTERNAL_ERROR: 'Internal server error',
}

const EXAMPLE_DETAILS: Partial<Record<ErrorCode, Record<string, unknown>>> = {
  VALIDATION_FAILED: { issues: [{ location: 'body', path: 'name', message: 'must not be empty' }] },
  PAYLOAD_TOO_LARGE: { limit: 1048576 },
  UNSUPPORTED_MEDIA_TYPE: { expected: 'application/json', received: 'text/plain' },
  RATE_LIMITED: { limit: 10, retry_after: 6 },
  CONCURRENCY_LIMIT: { limit: 5, running: 5 },
  BUDGET_EXCEEDED: { scope: 'user', limit: 200, spent: 200.12, resets_at: '2026-12-01T00:00:00.000Z' },
}

const RATE_HEADERS = ['RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'] as const

/** The response headers the document names under `components.headers`. */
export const HEADERS: OpenApiDocument['components']['headers'] = {
  'Retry-After': {
    description: 'Seconds until a request will be accepted again.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Policy': {
    description:
      'The bucket, as in the IETF RateLimit header fields draft: `<burst>;w=<seconds to refill>;burst=<burst>;rpm=<tokens per minute>`, e.g. `10;w=10;burst=10;rpm=60`.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': { description: "The caller's bucket capacity (burst).", schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Remaining': { description: 'Requests left in the bucket now.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Reset': {
    description: 'Seconds until the bucket is full again.',
    schema: { type: 'integer', minimum: 0 },
  },
}

const headerRefs = (names: readonly string[]) =>
  Object.fromEntries(names.map((n) => [n, { $ref: `#/components/headers/${n}` }]))

/** The error codes a route can answer with, from its auth level and inputs plus its own. */
function errorCodes(route: AnyRoute): ErrorCode[] {
  const codes: ErrorCode[] = []
  if (route.auth !== 'public') codes.push('UNAUTHORIZED')
  if (route.auth === 'admin') codes.push('FORBIDDEN')
  if (route.auth !== 'public' && !route.unlimited) codes.push('RATE_LIMITED')
  // Any operation: a path with an empty or dot segment, or malformed percent-encoding, is
  // refused before routing; a body it does not take is refused; and a path no operation
  // has (a mistyped id, another case, a `;param`) is 404.
  codes.push('VALIDATION_FAILED', 'NOT_FOUND')
  if (route.body || route.rawBody || route.multipart) codes.push('PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE')
  codes.push('INTERNAL_ERROR')
  return [...new Set([...codes, ...(route.errors ?? [])])]
}

/** The error responses of a route, one per status, each listing its codes with an example. */
export function errorResponses(route: AnyRoute): Record<string, OpenApiResponse> {
  // The pipeline adds RateLimit-* to every answer of a route that takes a token (a failed
  // authentication takes one of the client address's).
  const limited = route.auth !== 'public' && !route.unlimited
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of errorCodes(route))
    byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code])
  const out: Record<string, OpenApiResponse> = {}
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const retry = codes.includes('RATE_LIMITED') || codes.includes('CONCURRENCY_LIMIT')
    const headers =
      limited || route.auth !== 'public'
        ? headerRefs(retry ? ['Retry-After', ...RATE_HEADERS] : RATE_HEADERS)
        : undefined
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

const SUCCESS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No content',
  302: 'Redirect',
}

function isJsonType(type: string): boolean {
  return /^application\/([\w.+-]+\+)?json\b/i.test(type)
}

/** The success response of a route: its status, headers and content type, from its response schema. */
export function successResponse(route: AnyRoute, convert: Converter['convert']): OpenApiResponse {
  const status = route.status ?? 200
  const limited = route.auth !== 'public' && !route.unlimited
  const res: OpenApiResponse = {
    description: SUCCESS_TEXT[status] ?? 'Success',
    ...(limited && { headers: headerRefs(RATE_HEADERS) }),
  }
  if (status === 302) {
    res.headers = {
      ...res.headers,
      Location: { description: 'Where to go next.', schema: { type: 'string', format: 'uri-reference' } },
    }
    return res
  }
  if (status === 204) return res
  const type = route.produces ?? (route.response ? 'application/json' : undefined)
  if (!type) return res
  if (route.response) res.content = { [type]: { schema: convert(route.response, 'output') } }
  else if (/^text\//i.test(type)) res.content = { [type]: { schema: { type: 'string' } } }
  // Binary content: OpenAPI 3.1 describes raw bytes by the media type alone, without a schema.
  else
    res.content = { [type]: isJsonType(type) ? { schema: { type: 'object', description: ANY_VALUE_DESCRIPTION } } : {} }
  return res
}

/** The error model, as the document's description states it. */
export function errorModelText(): string {
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
    "Codes beyond the service spec's error table keep these answers in the same shape: `METHOD_NOT_ALLOWED` (405, the path exists but not with this method; the `Allow` header lists the methods), `PAYLOAD_TOO_LARGE` (413, the body exceeds the configured limit, 1 MiB by default) and `UNSUPPORTED_MEDIA_TYPE` (415, a body sent without the content type its operation takes: `application/json`, or `multipart/form-data` for uploads; a body is never guessed to be JSON). An unknown route is 404 `NOT_FOUND` (paths are matched as written: case, `;params` and a trailing segment make another path); another caller's resource is 404 too, never 403. A path with an empty segment (`//`), a dot segment (`.`, `..`, also encoded as `%2e`) or a backslash is refused with 400 `VALIDATION_FAILED` before routing, never resolved; so is a body sent to an operation that takes none (answered at once, the body unread). Malformed JSON is 400 `VALIDATION_FAILED`. Nothing a caller sends should produce a 500.",
    '',
    '## Rate limits',
    'Authenticated routes share a token bucket per caller. Their responses carry `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`; an empty bucket answers 429 `RATE_LIMITED` with `Retry-After` (seconds).',
    '',
    '## Idempotency',
    '`Idempotency-Key` is not honoured: the header is ignored, so a retried POST may create a second resource. List before retrying a create whose response was lost.',
  ].join('\n')
}
