/**
 * Splits Docker's multiplexed attach stream (non-TTY exec) into stdout and stderr. Each
 * frame is an 8-byte header — stream type (1 stdout, 2 stderr), three zero bytes, payload
 * size as a big-endian uint32 — followed by the payload. Frames may span chunks.
 */
export type StreamKind = 'stdout' | 'stderr'

/**
 * A demuxer: feed it raw chunks; it emits whole payloads as frames complete.
 *
 * @example
 * ```ts
 * socket.on('data', createDemuxer((kind, payload) => (kind === 'stderr' ? err : out).push(payload)))
 * ```
 */
export function createDemuxer(emit: (kind: StreamKind, payload: Uint8Array) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0)
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4)
      if (pending.length < 8 + size) break
      const kind = pending[0] === 2 ? 'stderr' : 'stdout'
      if (size > 0) emit(kind, Uint8Array.prototype.slice.call(pending, 8, 8 + size))
      pending = pending.subarray(8 + size)
    }
  }
}
