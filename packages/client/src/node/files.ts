import { openAsBlob } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { basename, resolve } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { ReadableStream as NodeWebStream } from 'node:stream/web'
import { x as extract } from 'tar'
import { normalizeUpload, toBlob, type UploadData, type UploadFile } from '../files.js'

/** In Node, a file to upload may also be a path, or a name with a Node stream or a path. */
export type NodeUploadFile = UploadFile | string | { name: string; data: UploadData | Readable | { path: string } }

/**
 * A name and a Blob for one upload: a path is read from disk as it is sent (not loaded
 * into memory first); a Node stream is read to its end.
 *
 * @example
 * ```ts
 * const { name, blob } = await nodeUpload('./report.pdf')
 * ```
 */
export async function nodeUpload(file: NodeUploadFile): Promise<{ name: string; blob: Blob }> {
  if (typeof file === 'string') return { name: basename(file), blob: await openAsBlob(file) }
  if ('data' in file) {
    const { name, data } = file
    if (data instanceof Readable)
      return { name, blob: await toBlob(Readable.toWeb(data) as unknown as ReadableStream<Uint8Array>) }
    if (typeof data === 'object' && 'path' in data && typeof data.path === 'string')
      return { name, blob: await openAsBlob(data.path) }
    return { name, blob: await toBlob(data as UploadData) }
  }
  return normalizeUpload(file)
}

/**
 * Extract a tar stream into `dir` (created when missing). Entries that would land outside
 * `dir` (absolute names, `..`) are refused by `tar`. Resolves with the entry paths written.
 *
 * @example
 * ```ts
 * await extractTar(await berth.files.download(workspaceId, 'out'), './out')
 * ```
 */
export async function extractTar(stream: ReadableStream<Uint8Array>, dir: string): Promise<string[]> {
  const cwd = resolve(dir)
  await mkdir(cwd, { recursive: true })
  const written: string[] = []
  await pipeline(
    Readable.fromWeb(stream as unknown as NodeWebStream<Uint8Array>),
    extract({ cwd, strict: true, onReadEntry: (entry) => void written.push(entry.path) }),
  )
  return written
}
