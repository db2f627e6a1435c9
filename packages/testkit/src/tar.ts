import { pack, extract, type Header } from 'tar-stream'

/** One tar entry to write: a file (with content), a directory, or a symlink (to `linkname`). */
export interface TarInput {
  name: string
  type?: 'file' | 'directory' | 'symlink'
  content?: Uint8Array | string
  mode?: number
  linkname?: string
}

/** One entry read back from a tar. */
export interface TarEntry {
  name: string
  type: Header['type']
  mode: number | undefined
  content: Buffer
}

/**
 * A tar archive of the given entries, as bytes.
 *
 * @example
 * ```ts
 * const tar = await packTar([{ name: 'a/', type: 'directory' }, { name: 'a/b.txt', content: 'hi' }])
 * ```
 */
export async function packTar(entries: TarInput[]): Promise<Uint8Array> {
  const p = pack()
  const chunks: Buffer[] = []
  p.on('data', (c: unknown) => {
    chunks.push(c as Buffer)
  })
  const done = new Promise<void>((res, rej) => {
    p.on('end', () => res())
    p.on('error', (err: Error) => rej(err))
  })
  for (const e of entries) {
    if ((e.type ?? 'file') === 'directory') {
      p.entry({ name: e.name, type: 'directory', mode: e.mode ?? 0o755 })
    } else if (e.type === 'symlink') {
      p.entry({ name: e.name, type: 'symlink', linkname: e.linkname ?? '' })
    } else {
      const body = typeof e.content === 'string' ? Buffer.from(e.content) : Buffer.from(e.content ?? new Uint8Array())
      p.entry({ name: e.name, type: 'file', mode: e.mode ?? 0o644, size: body.length }, body)
    }
  }
  p.finalize()
  await done
  return new Uint8Array(Buffer.concat(chunks))
}

/**
 * Every entry of a tar stream (a web stream, a Node stream or bytes), content included.
 *
 * @example
 * ```ts
 * const entries = await readTar(await rt.getArchive(id, '/workspace'))
 * entries.map((e) => e.name) // ['workspace/', 'workspace/a.txt']
 * ```
 */
export async function readTar(
  source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Uint8Array,
): Promise<TarEntry[]> {
  const x = extract()
  const feeding = (async () => {
    try {
      if (source instanceof Uint8Array) return void x.end(Buffer.from(source))
      // Node's web ReadableStream is async-iterable; TS's DOM lib does not say so.
      for await (const chunk of source as AsyncIterable<Uint8Array>) {
        if (!x.write(Buffer.from(chunk))) await new Promise<void>((r) => x.once('drain', () => r()))
      }
      x.end(Buffer.alloc(0))
    } catch (err) {
      x.destroy(err as Error)
    }
  })()
  const entries: TarEntry[] = []
  for await (const entry of x) {
    const parts: Buffer[] = []
    for await (const c of entry) parts.push(c as Buffer)
    const h = entry.header
    entries.push({ name: h.name, type: h.type, mode: h.mode, content: Buffer.concat(parts) })
  }
  await feeding
  return entries
}
