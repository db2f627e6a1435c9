/**
 * A workspace's files as a checkpoint's manifest: each entry of a container's tar read once
 * (a file's content hashed, sha256, and handed on as an object), and a tar built back from a
 * manifest and its objects.
 */
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { extract, pack, type Header } from 'tar-stream'

/** One entry of a checkpoint: its path under the workspace, what it is, its owner, mode and time. */
export interface ManifestEntry {
  path: string
  type: 'file' | 'directory' | 'symlink' | 'link'
  mode: number
  uid: number
  gid: number
  /** Seconds since the epoch. */
  mtime: number
  /** A file's bytes, and the sha256 of its content: the name of its object. */
  size?: number
  hash?: string
  /** A symbolic link's target, or a hard link's (another entry's path). */
  target?: string
}

/** How {@link readManifest} reads an archive. */
export interface ReadManifestOptions {
  /** The archive's top directory (`workspace`): left out, the entries named relative to it. */
  base: string
  /** Paths left out, with everything under them. */
  exclude: (path: string) => boolean
  /** The most the files' bytes may add up to: past it the read stops and answers `null`. */
  maxBytes: number
  /** Each file's hash and content, in order (the caller keeps the objects it has not got). */
  onFile: (hash: string, bytes: Uint8Array) => Promise<void>
}

const TYPES: Partial<Record<string, ManifestEntry['type']>> = {
  file: 'file',
  'contiguous-file': 'file',
  directory: 'directory',
  symlink: 'symlink',
  link: 'link',
}

/** `workspace/a/b` (or `./workspace/a/b/`) → `a/b`; the base itself and names outside it → null. */
function under(name: string, base: string): string | null {
  const plain = name.replace(/^\.\//, '').replace(/\/+$/, '')
  return plain.startsWith(`${base}/`) ? plain.slice(base.length + 1) : null
}

/**
 * The manifest of a tar of the workspace (as `ContainerRuntime.getArchive` gives it), files
 * hashed as they stream; `null` once the files' bytes pass `maxBytes`. Devices and pipes are
 * left out.
 *
 * @example
 * ```ts
 * const read = await readManifest(archive, { base: 'workspace', exclude: () => false, maxBytes: 1 << 30, onFile })
 * read?.entries // [{ path: 'a.txt', type: 'file', size: 2, hash: '…', … }]
 * ```
 */
export async function readManifest(
  archive: AsyncIterable<Uint8Array>,
  o: ReadManifestOptions,
): Promise<{ entries: ManifestEntry[]; bytes: number } | null> {
  const input = Readable.from(archive, { objectMode: false })
  const entries = extract()
  input.on('error', (err) => entries.destroy(err))
  input.pipe(entries as unknown as NodeJS.WritableStream)
  const out: ManifestEntry[] = []
  let bytes = 0
  try {
    for await (const entry of entries) {
      const h = entry.header
      const path = under(h.name, o.base)
      const type = TYPES[h.type ?? 'file']
      if (path === null || !type || o.exclude(path)) {
        entry.resume()
        continue
      }
      const base = {
        path,
        type,
        mode: h.mode ?? 0o644,
        uid: h.uid ?? 0,
        gid: h.gid ?? 0,
        mtime: Math.floor((h.mtime?.getTime() ?? 0) / 1000),
      }
      if (type !== 'file') {
        entry.resume()
        const target = type === 'link' ? under(h.linkname ?? '', o.base) : h.linkname
        // A hard link to something outside the workspace cannot be put back: left out.
        if (target) out.push({ ...base, target })
        else if (type === 'directory') out.push(base)
        continue
      }
      bytes += h.size ?? 0
      if (bytes > o.maxBytes) return null
      const hash = createHash('sha256')
      const chunks: Buffer[] = []
      for await (const chunk of entry as AsyncIterable<Buffer>) {
        hash.update(chunk)
        chunks.push(chunk)
      }
      const digest = hash.digest('hex')
      const content = Buffer.concat(chunks)
      await o.onFile(digest, content)
      out.push({ ...base, size: content.byteLength, hash: digest })
    }
    return { entries: out, bytes }
  } finally {
    input.destroy()
    entries.destroy()
  }
}

/**
 * A tar of a manifest's entries (named relative to the workspace, as `putArchive` into
 * `/workspace` takes them), each file's content read by its hash.
 *
 * @example
 * ```ts
 * const tar = await manifestTar(entries, (hash) => blobs.get(`objects/${hash}`))
 * await runtime.putArchive(engineId, '/workspace', tar)
 * ```
 */
export async function manifestTar(
  entries: readonly ManifestEntry[],
  read: (hash: string) => Promise<Uint8Array | null>,
): Promise<Uint8Array> {
  const out = pack()
  const chunks: Buffer[] = []
  out.on('data', (chunk: unknown) => chunks.push(chunk as Buffer))
  const ended = new Promise<void>((resolve, reject) => {
    out.on('end', resolve)
    out.on('error', reject)
  })
  for (const e of entries) {
    const header: Partial<Header> & Pick<Header, 'name'> = {
      name: e.path,
      type: e.type,
      mode: e.mode,
      uid: e.uid,
      gid: e.gid,
      mtime: new Date(e.mtime * 1000),
    }
    let content: Buffer | undefined
    if (e.type === 'file') {
      const bytes = await read(e.hash!)
      if (!bytes) throw new Error(`the content of ${e.path} (${e.hash}) is missing from the checkpoint`)
      content = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      header.size = content.byteLength
    } else if (e.target !== undefined) header.linkname = e.target
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error | null) => (err ? reject(err) : resolve())
      if (content) out.entry(header, content, done)
      else out.entry(header, done)
    })
  }
  out.finalize()
  await ended
  return Buffer.concat(chunks)
}
