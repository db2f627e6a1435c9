/**
 * A web ReadableStream over an async iterable of bytes (Node 20's `Readable.toWeb` throws on tar-stream's pack).
 *
 * @example
 * ```ts
 * return toWebStream(tarPack, () => tarPack.destroy())
 * ```
 */
export function toWebStream(source: AsyncIterable<Uint8Array>, onCancel?: () => void): ReadableStream<Uint8Array> {
  const it = source[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await it.next()
        if (done) controller.close()
        else controller.enqueue(value)
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
