/**
 * The streaming cap on upload (`multipart`) request bodies. Not srvx's `limitRequestBody`
 * (nor h3's `assertBodySize`, built on it): both cancel the incoming stream, at once for a
 * declared length over the limit and on the first chunk past it, which is what the note
 * below must avoid on Node 20; and core imports no HTTP framework.
 */
import { ApiError } from '@berth/contract'

/**
 * The request with its body capped at `limit` bytes: 413 now when the declared length is
 * over it, else reading past it fails with 413 (the handler's read throws it), so an
 * upload is counted as it streams and never buffered here.
 *
 * @example
 * ```ts
 * const capped = limitBody(request, 100 * 1024 * 1024)
 * await capped.arrayBuffer() // throws PAYLOAD_TOO_LARGE past the limit
 * ```
 */
export function limitBody(request: Request, limit: number): Request {
  const tooLarge = () =>
    new ApiError('PAYLOAD_TOO_LARGE', `Request body exceeds ${limit} bytes`, { limit }, { connection: 'close' })
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw tooLarge()
  if (!request.body) return request
  let size = 0
  const counted = request.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        size += chunk.byteLength
        if (size > limit) controller.error(tooLarge())
        else controller.enqueue(chunk)
      },
    }),
    // Never cancel the incoming stream (see readBodyBytes: Node 20 would throw an uncaught
    // error for data arriving afterwards); a 413 closes the connection instead.
    { preventCancel: true },
  )
  return new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body: counted,
    signal: request.signal,
    duplex: 'half',
  } as RequestInit)
}
