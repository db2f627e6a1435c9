import { extract, pack, type Header } from 'tar-stream'

/**
 * Rewrite a tar stream so directory entries end in `/`, as Docker writes them; Podman's
 * archive endpoint names them `dir`. Streaming: entries pass through one at a time.
 *
 * @example
 * ```ts
 * for await (const chunk of slashDirectoryNames(podmanTar)) out.write(chunk)
 * ```
 */
export function slashDirectoryNames(tar: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  const x = extract()
  const p = pack()
  const fail = (err: unknown) => {
    x.destroy(err as Error)
    p.destroy(err as Error)
  }
  void (async () => {
    for await (const chunk of tar) {
      if (!x.write(Buffer.from(chunk))) await new Promise<void>((r) => x.once('drain', () => r()))
    }
    x.end(Buffer.alloc(0))
  })().catch(fail)
  void (async () => {
    for await (const entry of x) {
      const header: Header = { ...entry.header }
      if (header.type === 'directory' && !header.name.endsWith('/')) header.name += '/'
      await new Promise<void>((resolve, reject) => {
        const sink = p.entry(header, (err) => (err ? reject(err) : resolve()))
        entry.pipe(sink)
      })
    }
    p.finalize()
  })().catch(fail)
  return p as unknown as AsyncIterable<Uint8Array>
}
