import { createReadStream, createWriteStream } from 'node:fs'
import { lstat, mkdir, readdir, readlink, rm, symlink } from 'node:fs/promises'
import { basename, join, posix } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { extract, pack, type Header, type Pack } from 'tar-stream'

/** One entry of tar-stream's extract: its header and a readable of its content. */
interface EntryStream {
  header: Header
  resume(): unknown
}

/**
 * A tar of a host file or directory, named like the Docker archive endpoint names it: the
 * top entry is `name` (the container path's base name; by default the host path's),
 * directories end in `/`.
 *
 * @example
 * ```ts
 * for await (const chunk of packPath('/srv/berth/volumes/berth-ws-1', 'workspace')) out.write(chunk)
 * ```
 */
export function packPath(path: string, name = basename(path)): Pack {
  const p = pack()
  const add = async (abs: string, name: string): Promise<void> => {
    const st = await lstat(abs)
    const base = { mode: st.mode & 0o7777, mtime: st.mtime, uid: st.uid, gid: st.gid }
    if (st.isDirectory()) {
      await entry(p, { ...base, name: `${name}/`, type: 'directory' })
      for (const child of (await readdir(abs)).sort()) await add(join(abs, child), `${name}/${child}`)
    } else if (st.isSymbolicLink()) {
      await entry(p, { ...base, name, type: 'symlink', linkname: await readlink(abs) })
    } else if (st.isFile()) {
      await new Promise<void>((resolve, reject) => {
        const sink = p.entry({ ...base, name, type: 'file', size: st.size }, (err) => (err ? reject(err) : resolve()))
        createReadStream(abs)
          .on('error', reject)
          .pipe(sink as unknown as NodeJS.WritableStream)
      })
    }
  }
  add(path, name).then(
    () => p.finalize(),
    (err: Error) => p.destroy(err),
  )
  return p
}

function entry(p: Pack, header: Partial<Header> & { name: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    p.entry(header, (err) => (err ? reject(err) : resolve()))
  })
}

/** An entry name as a safe relative path, or `null` for names that climb out (`..`) or are empty. */
function safeRelative(name: string): string | null {
  if (name.split('/').includes('..')) return null
  const norm = posix.normalize(`/${name}`).slice(1).replace(/\/$/, '')
  return norm === '' ? null : norm
}

/**
 * Extract a tar (any async iterable of bytes) into an existing host directory: files,
 * directories and symlinks, with their modes. Entries whose names climb out are rejected.
 *
 * @example
 * ```ts
 * await extractInto('/srv/berth/ab12/root/workspace', tarBytesIterable)
 * ```
 */
export async function extractInto(dir: string, tar: AsyncIterable<Uint8Array>): Promise<void> {
  const x = extract()
  const feeding = (async () => {
    try {
      for await (const chunk of tar) {
        if (!x.write(Buffer.from(chunk))) await new Promise<void>((r) => x.once('drain', () => r()))
      }
      x.end(Buffer.alloc(0))
    } catch (err) {
      x.destroy(err as Error)
    }
  })()
  try {
    for await (const e of x) await extractEntry(dir, e)
  } catch (err) {
    x.destroy(err as Error)
    await feeding
    throw err
  }
  await feeding
}

async function extractEntry(dir: string, e: EntryStream): Promise<void> {
  const h = e.header
  const rel = safeRelative(h.name)
  if (rel === null) {
    e.resume()
    if (h.name.replace(/^\.?\/*/, '') === '') return // "./" itself
    throw new Error(`archive entry "${h.name}" escapes the target directory`)
  }
  const target = join(dir, rel)
  if (h.type === 'directory') {
    await mkdir(target, { recursive: true, mode: h.mode })
    e.resume()
  } else if (h.type === 'symlink') {
    await mkdir(join(target, '..'), { recursive: true })
    await rm(target, { force: true })
    await symlink(h.linkname, target)
    e.resume()
  } else if (h.type === 'file' || h.type === 'contiguous-file') {
    await mkdir(join(target, '..'), { recursive: true })
    await rm(target, { force: true })
    await pipeline(e as unknown as NodeJS.ReadableStream, createWriteStream(target, { mode: h.mode }))
  } else {
    e.resume() // devices, fifos, hard links: not supported locally
  }
}
