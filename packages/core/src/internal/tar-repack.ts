/**
 * Rewriting the tar archives a container engine produces (ustar, GNU and PAX), entry by
 * entry with tar-stream: rename entries, leave some out, join several archives into one.
 * Entry data streams through; nothing is collected.
 */
import { Readable } from 'node:stream'
import { extract, pack, type Extract, type Header, type Pack } from 'tar-stream'

/** The new name of an entry, or `null` to leave it out. */
export type RenameEntry = (name: string) => string | null

/** One archive to copy and how to rename its entries. */
export interface TarSource {
  archive: AsyncIterable<Uint8Array>
  rename: RenameEntry
}

/**
 * One archive holding the renamed entries of every source, in order. Hard links are
 * renamed by the same function (their target is an entry of the same archive); symbolic
 * links keep their target. The other header fields and PAX records are kept.
 *
 * @example
 * ```ts
 * const tar = repackTar([{ archive, rename: (name) => name.replace(/^b(\/|$)/, 'a/b$1') }])
 * for await (const chunk of tar) sink.write(chunk)
 * ```
 */
export async function* repackTar(sources: AsyncIterable<TarSource> | Iterable<TarSource>): AsyncGenerator<Uint8Array> {
  const out = pack()
  /** The archive being copied, and whether the consumer stopped. */
  const reading: { input: Readable | null; entries: Extract | null; stopped: boolean } = {
    input: null,
    entries: null,
    stopped: false,
  }
  const produce = async () => {
    for await (const source of sources) {
      if (reading.stopped) return
      reading.input = Readable.from(source.archive, { objectMode: false })
      reading.entries = extract()
      await copyEntries(reading.input, reading.entries, source.rename, out)
    }
    out.finalize()
  }
  const produced = produce().catch((err: unknown) => {
    out.destroy(err as Error)
  })
  try {
    yield* out as AsyncIterable<Uint8Array>
    await produced
  } finally {
    // A consumer that stops early stops the reading of the engine's archive too, and no
    // further archive is asked for.
    reading.stopped = true
    reading.input?.destroy()
    reading.entries?.destroy()
    out.destroy()
  }
}

async function copyEntries(input: Readable, entries: Extract, rename: RenameEntry, out: Pack): Promise<void> {
  input.on('error', (err) => entries.destroy(err))
  input.pipe(entries as unknown as NodeJS.WritableStream)
  for await (const entry of entries) {
    const header = renamed(entry.header, rename)
    if (!header) {
      entry.resume()
      continue
    }
    await new Promise<void>((resolve, reject) => {
      entry.pipe(out.entry(header, (err) => (err ? reject(err) : resolve())))
    })
  }
}

function renamed(header: Header, rename: RenameEntry): Header | null {
  const name = rename(header.name)
  if (name === null) return null
  const linkname =
    header.type === 'link' && header.linkname ? (rename(header.linkname) ?? header.linkname) : header.linkname
  // The PAX records of the source, but for the names: tar-stream writes those anew.
  const pax = header.pax
    ? Object.fromEntries(Object.entries(header.pax).filter(([key]) => key !== 'path' && key !== 'linkpath'))
    : {}
  return { ...header, name, linkname, pax: Object.keys(pax).length ? pax : undefined }
}
