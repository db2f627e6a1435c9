/**
 * The `BlobStore` port: large bytes kept beside the records rather than in them (a
 * finished batch workspace's files), so the database grows by a record, not by the bytes.
 * `@berth/server` keeps them as files under the data dir; `memoryBlobs` is for tests.
 */

/** Bytes by key (`usr_1/ws_1.tar`: letters, digits, `_`, `-`, `.` and `/` between segments). */
export interface BlobStore {
  /** Write (or replace) a blob whole. */
  put(key: string, bytes: Uint8Array): Promise<void>
  /** A blob's bytes, or `null` when absent. */
  get(key: string): Promise<Uint8Array | null>
  /** Delete a blob; absent blobs resolve. */
  remove(key: string): Promise<void>
}

/**
 * Blobs in this process's memory (tests, embedders without a data dir).
 *
 * @example
 * ```ts
 * const blobs = memoryBlobs()
 * await blobs.put('usr_1/ws_1.tar', new Uint8Array([1]))
 * ```
 */
export function memoryBlobs(): BlobStore {
  const data = new Map<string, Uint8Array>()
  return {
    put: async (key, bytes) => void data.set(key, bytes),
    get: async (key) => data.get(key) ?? null,
    remove: async (key) => void data.delete(key),
  }
}
