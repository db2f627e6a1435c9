import * as v from 'valibot'
import { ApiError, validationError, type ValidationIssue } from '@berth/contract'

type Location = ValidationIssue['location']

/** Unwrap optional/nullable/pipe wrappers to the schema that decides the value's type. */
function baseType(schema: v.GenericSchema): string {
  let s = schema as v.GenericSchema & { wrapped?: v.GenericSchema; pipe?: v.GenericSchema[] }
  for (let i = 0; i < 10; i++) {
    if (s.wrapped) s = s.wrapped as typeof s
    else if (s.pipe && s.pipe[0] !== s) s = s.pipe[0] as typeof s
    else break
  }
  return s.type
}

/**
 * Turn a URL query into the shape its object schema expects: numbers and booleans parsed
 * from their text, repeated keys into arrays for array fields, single values otherwise.
 * Text that does not parse stays text, so validation reports it against the field.
 */
export function coerceQuery(schema: v.GenericSchema | undefined, params: URLSearchParams): Record<string, unknown> {
  const entries = (schema as { entries?: Record<string, v.GenericSchema> } | undefined)?.entries ?? {}
  const out: Record<string, unknown> = {}
  for (const key of new Set(params.keys())) {
    const all = params.getAll(key)
    const field = entries[key]
    const type = field ? baseType(field) : 'string'
    const one = all[all.length - 1] ?? ''
    if (type === 'array') out[key] = all
    else if (type === 'number') out[key] = /^-?\d+(\.\d+)?$/.test(one) ? Number(one) : one
    else if (type === 'boolean') out[key] = one === 'true' ? true : one === 'false' ? false : one
    else out[key] = one
  }
  return out
}

/** Valibot issues → Berth validation issues with dotted paths and readable messages. */
export function toIssues(location: Location, issues: readonly v.BaseIssue<unknown>[]): ValidationIssue[] {
  return issues.map((issue) => {
    const path = (issue.path ?? []).map((p) => String(p.key)).join('.')
    // Strict objects report an unknown key as a "never" issue on that key.
    const unknownKey = issue.expected === 'never' && issue.path?.length
    return { location, path, message: unknownKey ? 'unknown field' : issue.message }
  })
}

/**
 * Validate one part of the input; 400 VALIDATION_FAILED with every problem otherwise.
 *
 * @example
 * ```ts
 * const body = parseInput('body', CreateProfile, json)
 * ```
 */
export function parseInput<S extends v.GenericSchema>(location: Location, schema: S, value: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, value)
  if (result.success) return result.output
  throw validationError(toIssues(location, result.issues))
}

/**
 * The raw body, at most `limit` bytes: 413 beyond it, whether declared or streamed (the
 * rest is not read).
 */
export async function readBodyBytes(request: Request, limit: number): Promise<Buffer> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit)
  if (!request.body) return Buffer.alloc(0)
  const reader = request.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>
    try {
      chunk = await reader.read()
    } catch {
      // The connection broke before the body ended (hang-up, bad chunk size).
      throw clientAborted()
    }
    const { done, value } = chunk
    if (done) break
    size += value.byteLength
    if (size > limit) {
      // Stop reading, never cancel: Node 20's adapter for incoming request streams still
      // enqueues data that arrives after a cancel and throws an uncaught ERR_INVALID_STATE,
      // which would crash the server. The 413 closes the connection, discarding the rest.
      reader.releaseLock()
      throw tooLarge(limit)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}

const MEDIA_TYPES = {
  json: { name: 'application/json', re: /^application\/([\w.+-]+\+)?json\s*(;|$)/i },
  multipart: { name: 'multipart/form-data', re: /^multipart\/form-data\s*(;|$)/i },
}

/**
 * 415 UNSUPPORTED_MEDIA_TYPE unless the request's `Content-Type` is the one the operation
 * takes: JSON (`application/json`, `application/*+json`) or `multipart/form-data`. A body
 * without a content type is refused too: it is never guessed.
 */
export function assertMediaType(request: Request, expected: keyof typeof MEDIA_TYPES): void {
  const type = request.headers.get('content-type')
  const { name, re } = MEDIA_TYPES[expected]
  if (type !== null && re.test(type.trim())) return
  throw new ApiError(
    'UNSUPPORTED_MEDIA_TYPE',
    type === null
      ? `The body needs a Content-Type: send ${name}`
      : `Content-Type ${type.slice(0, 100)} is not taken here: send ${name}`,
    { expected: name, received: type?.slice(0, 100) ?? null },
  )
}

/**
 * A JSON body's raw bytes, at most `limit`: 413 beyond it, 415 unless it is sent as JSON
 * (an empty body, taken as none, needs no content type).
 */
export async function readJsonBytes(request: Request, limit: number): Promise<Buffer> {
  const bytes = await readBodyBytes(request, limit)
  if (bytes.length > 0) assertMediaType(request, 'json')
  return bytes
}

/**
 * Read a JSON body of at most `limit` bytes: 413 beyond it (declared or streamed), 415 for
 * a content type other than JSON, 400 for malformed JSON, `undefined` for an empty body.
 */
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const bytes = await readJsonBytes(request, limit)
  if (bytes.length === 0) return undefined
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes)
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new ApiError('VALIDATION_FAILED', 'Malformed JSON body', {
      issues: [{ location: 'body', path: '', message: (err as Error).message.slice(0, 200) }],
    })
  }
}

/**
 * Whether the request's headers announce a body: `true` for a length over 0, `false` for
 * none, `'chunked'` for a chunked body, which may still turn out empty.
 */
export function carriesBody(request: Request): boolean | 'chunked' {
  const declared = request.headers.get('content-length')
  if (declared !== null) return declared.trim() !== '0'
  return request.headers.has('transfer-encoding') ? 'chunked' : false
}

/**
 * 400 when a request to an operation that takes no body carries one: at once when its
 * length is declared, else at its first byte. The rest is never read: the answer closes
 * the connection, as a 413 does.
 */
export function assertNoBody(request: Request): void | Promise<void> {
  const carries = carriesBody(request)
  if (carries === true) throw bodyRefused()
  // A request without a length or a chunked body (every GET) is answered without a promise.
  if (carries === false) return
  // A GET's or HEAD's body cannot be read (the server hands none over): its header says enough.
  if (!request.body) throw bodyRefused()
  return refuseFirstByte(request.body)
}

async function refuseFirstByte(body: ReadableStream<Uint8Array>): Promise<void> {
  const reader = body.getReader()
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>
      try {
        chunk = await reader.read()
      } catch {
        throw clientAborted()
      }
      if (chunk.done) return
      if (chunk.value.byteLength > 0) throw bodyRefused()
    }
  } finally {
    // Never cancel (see readBodyBytes).
    reader.releaseLock()
  }
}

function bodyRefused(): ApiError {
  return new ApiError(
    'VALIDATION_FAILED',
    'This operation takes no request body',
    { issues: [{ location: 'body', path: '', message: 'this operation takes no body: send none' }] },
    { connection: 'close' },
  )
}

/** Marks the error of a request whose client went away mid-body (logged at info, not as a failure). */
export const CLIENT_ABORTED = 'client_aborted'

/**
 * The 400 for a body that could not be read to its end; nobody is left to read it.
 *
 * @example
 * ```ts
 * isClientAbort(clientAborted()) // true
 * ```
 */
export function clientAborted(): ApiError {
  return new ApiError(
    'VALIDATION_FAILED',
    'The request body ended early: the client aborted or sent a malformed body',
    {
      issues: [{ location: 'body', path: '', message: 'incomplete body' }],
      reason: CLIENT_ABORTED,
    },
  )
}

/** True for the error of {@link clientAborted}. */
export function isClientAbort(err: unknown): boolean {
  return err instanceof ApiError && err.details?.reason === CLIENT_ABORTED
}

function tooLarge(limit: number): ApiError {
  // The rest of the upload is not read: close the connection rather than drain it.
  return new ApiError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`, { limit }, { connection: 'close' })
}
