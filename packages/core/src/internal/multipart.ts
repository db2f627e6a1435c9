/**
 * `multipart/form-data` bodies (RFC 7578) read with @fastify/busboy, as parts that come
 * one at a time: each file's body streams through without being collected, so an upload
 * is never held in memory whole.
 */
import type { EventEmitter } from 'node:events'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Busboy } from '@fastify/busboy'

/** One part of a form. Read its `body` (or leave it) before asking for the next part. */
export interface MultipartPart {
  /** The form field name. */
  name: string
  /** The file name for file parts, `null` for plain fields. */
  filename: string | null
  contentType: string | null
  body: AsyncIterable<Uint8Array>
}

/** The body is not well-formed multipart. */
export class MultipartError extends Error {}

const MAX_HEADER_BYTES = 16 * 1024

/**
 * The parts of a `multipart/form-data` body, one after another, or `null` when the content
 * type is not `multipart/form-data` with a boundary. Throws {@link MultipartError} for a
 * malformed body; errors of the source pass through unchanged.
 *
 * @example
 * ```ts
 * const parts = readMultipart(request.body, request.headers.get('content-type'))
 * for await (const part of parts ?? []) {
 *   if (part.filename) for await (const chunk of part.body) sink.write(chunk)
 * }
 * ```
 */
export function readMultipart(
  source: AsyncIterable<Uint8Array>,
  contentType: string | null,
): AsyncGenerator<MultipartPart> | null {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) return null
  let parser: InstanceType<typeof Busboy>
  try {
    parser = new Busboy({
      headers: { 'content-type': contentType },
      // File names are checked by the caller: a name with a "/" is refused, not cut to its last segment.
      preservePath: true,
      isPartAFile: (_field, _type, filename) => filename !== undefined,
      limits: { headerSize: MAX_HEADER_BYTES },
    })
  } catch {
    return null
  }
  return parts(parser, source)
}

async function* parts(
  parser: InstanceType<typeof Busboy>,
  source: AsyncIterable<Uint8Array>,
): AsyncGenerator<MultipartPart> {
  /** Parts not yet handed out, with the stream behind a file part's body. */
  const queue: { part: MultipartPart; file?: Readable }[] = []
  const state: {
    sourceError: unknown
    failure: unknown
    finished: boolean
    file: Readable | null
    wake: (() => void) | null
  } = {
    sourceError: null,
    failure: null,
    finished: false,
    file: null,
    wake: null,
  }
  const wake = () => {
    state.wake?.()
    state.wake = null
  }
  /** A failure of the source as itself, anything else as a malformed body. */
  const failure = (err: unknown) =>
    state.sourceError ?? (err instanceof MultipartError ? err : new MultipartError(lowerFirst(err)))

  // Busboy skips a part whose headers name no form-data field, where RFC 7578 requires
  // every part to have one: such a body is malformed (400), as it always was here. The part
  // parser under busboy is watched for it (its header listener runs after busboy's).
  const partParser = (parser as unknown as { _parser?: { parser?: EventEmitter } })._parser?.parser
  partParser?.on('part', (part: EventEmitter) => {
    part.once('header', (header: Record<string, string[] | undefined>) => {
      const disposition = header['content-disposition']?.[0] ?? ''
      if (!/^form-data\s*;/i.test(disposition) || !/;\s*name\s*=/i.test(disposition)) {
        state.failure ??= new MultipartError('a part has no Content-Disposition: form-data header with a name')
        wake()
      }
    })
  })
  parser.on('file', (name, stream, filename, _encoding, type) => {
    // A part without a field name is refused by the header check above.
    if (name === undefined) return void stream.resume()
    state.file = stream
    // Its failure reaches the reader through fileBody or the next part; a file never read
    // (the reader stopped before it) must not turn it into an uncaught error.
    stream.on('error', () => {})
    stream.once('end', () => {
      if (state.file === stream) state.file = null
    })
    queue.push({
      part: {
        name: unescapeFieldName(name),
        filename: unescapeFieldName(filename),
        contentType: type,
        body: fileBody(stream, failure),
      },
      file: stream,
    })
    wake()
  })
  parser.on('field', (name, value, _nameTruncated, _valueTruncated, _encoding, type) => {
    if (name === undefined) return
    queue.push({
      part: {
        name: unescapeFieldName(name),
        filename: null,
        contentType: type,
        body: Readable.from([Buffer.from(value)]),
      },
    })
    wake()
  })
  parser.on('finish', () => {
    state.finished = true
    wake()
  })
  parser.on('error', (err: unknown) => {
    state.failure ??= failure(err)
    state.file?.destroy(state.failure as Error)
    wake()
  })

  /** The source, its own failure noted so it reaches the reader as itself. */
  const watched = async function* () {
    try {
      yield* source
    } catch (err) {
      state.sourceError = err
      throw err
    }
  }
  const input = Readable.from(watched(), { objectMode: false })
  // A failed source or a parser stopped below rejects here; the 'error' listener tells the reader.
  pipeline(input, parser).catch((err: unknown) => parser.emit('error', err))

  try {
    for (;;) {
      const next = queue.shift()
      if (next) {
        yield next.part
        // Whatever the consumer left unread is skipped.
        next.file?.resume()
        continue
      }
      if (state.failure) throw state.failure
      if (state.finished) return
      await new Promise<void>((resolve) => (state.wake = resolve))
    }
  } finally {
    state.finished = true
    input.destroy()
  }
}

async function* fileBody(stream: Readable, failure: (err: unknown) => unknown): AsyncGenerator<Uint8Array> {
  try {
    yield* stream as AsyncIterable<Uint8Array>
  } catch (err) {
    throw failure(err)
  }
}

/** Names with the escapes browsers write for `"`, CR and LF (the HTML form encoding) undone. */
function unescapeFieldName(name: string): string {
  return name.replace(/%22/g, '"').replace(/%0D/gi, '\r').replace(/%0A/gi, '\n')
}

function lowerFirst(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err)
  return message.charAt(0).toLowerCase() + message.slice(1)
}
