/**
 * A streaming `multipart/form-data` reader (RFC 7578): parts come one at a time and each
 * part's body streams through without being collected, so an upload is never held in
 * memory whole.
 */
import { ByteReader } from './byte-reader.js'

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
const CRLF = new Uint8Array([13, 10])
const enc = new TextEncoder()

/**
 * The boundary of a `multipart/form-data` content type, or `null` when it is not one.
 *
 * @example
 * ```ts
 * multipartBoundary('multipart/form-data; boundary=abc') // 'abc'
 * ```
 */
export function multipartBoundary(contentType: string | null): string | null {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) return null
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType)
  return m ? (m[1] ?? m[2]!) : null
}

function indexOf(haystack: Uint8Array, needle: Uint8Array, from = 0): number {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(needle, from)
}

/** Quoted-string or token value of a header parameter, with browsers' `%22`/`%0D`/`%0A` escapes undone. */
function param(header: string, key: string): string | null {
  const re = new RegExp(`;\\s*${key}\\s*=\\s*(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i')
  const m = re.exec(header)
  if (!m) return null
  if (m[2] !== undefined) return m[2]
  return m[1]!.replace(/\\(.)/g, '$1').replace(/%22/g, '"').replace(/%0D/gi, '\r').replace(/%0A/gi, '\n')
}

function parseHeaders(block: string): { name: string; filename: string | null; contentType: string | null } {
  let disposition: string | null = null
  let contentType: string | null = null
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const key = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    if (key === 'content-disposition') disposition = value
    else if (key === 'content-type') contentType = value
  }
  if (!disposition || !/^form-data\s*(;|$)/i.test(disposition)) throw new MultipartError('a part has no Content-Disposition: form-data header')
  const name = param(disposition, 'name')
  if (name === null) throw new MultipartError('a part has no field name')
  let filename = param(disposition, 'filename')
  const extended = param(disposition, 'filename\\*')
  if (extended) {
    const m = /^utf-8'[^']*'(.*)$/i.exec(extended)
    if (m) {
      try {
        filename = decodeURIComponent(m[1]!)
      } catch {
        throw new MultipartError('a part has a malformed filename*')
      }
    }
  }
  return { name, filename, contentType }
}

/**
 * The parts of a `multipart/form-data` body, one after another. Throws
 * {@link MultipartError} for a malformed body; errors of the source pass through.
 *
 * @example
 * ```ts
 * for await (const part of readMultipart(request.body, multipartBoundary(type)!)) {
 *   if (part.filename) for await (const chunk of part.body) sink.write(chunk)
 * }
 * ```
 */
export async function* readMultipart(source: AsyncIterable<Uint8Array>, boundary: string): AsyncGenerator<MultipartPart> {
  const reader = new ByteReader(source)
  const dash = enc.encode(`--${boundary}`)
  const delimiter = enc.encode(`\r\n--${boundary}`)
  try {
    // The preamble, up to the first boundary line.
    for (;;) {
      const buf = await reader.ensure(dash.length)
      const at = indexOf(buf, dash)
      if (at >= 0) {
        reader.skip(at + dash.length)
        break
      }
      if (buf.length < dash.length) throw new MultipartError('no multipart boundary found in the body')
      reader.skip(buf.length - dash.length + 1)
      await reader.ensure(dash.length + 1)
    }
    for (;;) {
      // After a boundary: `--` ends the body; else optional padding, then CRLF and a part.
      const after = await reader.ensure(2)
      if (after[0] === 45 && after[1] === 45) return
      const eol = indexOf(await reader.ensure(CRLF.length + 256), CRLF)
      if (eol < 0) throw new MultipartError('malformed boundary line')
      reader.skip(eol + 2)
      let headersEnd = -1
      for (;;) {
        const buf = await reader.peek()
        headersEnd = indexOf(buf, enc.encode('\r\n\r\n'))
        if (headersEnd >= 0) break
        if (buf.length > MAX_HEADER_BYTES) throw new MultipartError('part headers too long')
        const before = buf.length
        if ((await reader.ensure(before + 1)).length === before) throw new MultipartError('the body ended inside part headers')
      }
      const head = await reader.read(headersEnd + 4)
      const info = parseHeaders(new TextDecoder().decode(head!.subarray(0, headersEnd)))
      let finished = false
      /** The next piece of this part's body, `null` after its last. */
      const nextChunk = async (): Promise<Uint8Array | null> => {
        while (!finished) {
          const buf = await reader.ensure(delimiter.length)
          const at = indexOf(buf, delimiter)
          if (at >= 0) {
            reader.skip(at + delimiter.length)
            finished = true
            if (at > 0) return buf.subarray(0, at)
            break
          }
          if (buf.length < delimiter.length) throw new MultipartError('the body ended inside a part')
          // Everything but what could be the start of a delimiter split across chunks.
          const safe = buf.length - delimiter.length + 1
          reader.skip(safe)
          return buf.subarray(0, safe)
        }
        return null
      }
      yield {
        ...info,
        body: {
          async *[Symbol.asyncIterator]() {
            for (let chunk = await nextChunk(); chunk; chunk = await nextChunk()) yield chunk
          },
        },
      }
      // Whatever the consumer left unread is skipped.
      while (await nextChunk());
    }
  } finally {
    await reader.cancel()
  }
}
