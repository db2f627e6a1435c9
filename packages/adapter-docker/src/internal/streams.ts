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
