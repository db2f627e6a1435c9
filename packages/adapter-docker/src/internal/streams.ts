import { Readable } from 'node:stream'
import type { ByteSource } from '@berth/core'

/**
 * A byte source as something dockerode can send: a Buffer, or a Node readable.
 *
 * @example
 * ```ts
 * await container.putArchive(toRequestBody(tarBytes), { path: '/workspace' })
 * ```
 */
export function toRequestBody(source: ByteSource): Buffer | Readable {
  if (source instanceof Uint8Array) return Buffer.from(source.buffer, source.byteOffset, source.byteLength)
  return Readable.from(source as AsyncIterable<Uint8Array>, { objectMode: false })
}

/**
 * A web ReadableStream over any async iterable of bytes (a Node readable included). Node 20's
 * `Readable.toWeb` is avoided: it throws on some stream implementations (tar-stream's pack).
 *
 * @example
 * ```ts
 * return new Response(toWebStream(nodeReadable))
 * ```
 */
export function toWebStream(source: AsyncIterable<Uint8Array>, onCancel?: () => void): ReadableStream<Uint8Array> {
  const it = source[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await it.next()
        if (done) controller.close()
        else controller.enqueue(value instanceof Uint8Array ? value : new Uint8Array(value as ArrayBufferLike))
      } catch (err) {
        controller.error(err)
      }
    },
    async cancel() {
      onCancel?.()
      await it.return?.()
    },
  })
}
