import type { RouteOutput } from './types.js'

/** The bytes of one file to upload. Streams are read to the end before sending. */
export type UploadData = Blob | Uint8Array | ArrayBuffer | ReadableStream<Uint8Array>

/** One file to upload: a `File` (its name is used), or a name and its bytes. */
export type UploadFile = File | { name: string; data: UploadData }

/** A directory listing (`GET /v1/workspaces/:id/files`). */
export type FileListing = RouteOutput<'workspaces.files.list'>
/** What an upload stored. */
export type UploadResult = RouteOutput<'workspaces.files.upload'>

/** Options of `files.upload`. */
export interface UploadOptions {
  /** The directory under `/workspace` to store the files in (default `.`, the workspace). */
  dir?: string
  signal?: AbortSignal
}

/**
 * The bytes of `data` as a `Blob` (a stream is read to its end: browsers cannot stream a
 * request body over HTTP/1.1).
 *
 * @example
 * ```ts
 * const blob = await toBlob(new Uint8Array([1, 2, 3]))
 * ```
 */
export async function toBlob(data: UploadData): Promise<Blob> {
  if (data instanceof Blob) return data
  if (data instanceof Uint8Array || data instanceof ArrayBuffer) return new Blob([data as BlobPart])
  return new Response(data).blob()
}

/**
 * The multipart body of an upload: the `path` field, then one part per file.
 *
 * @example
 * ```ts
 * const form = await uploadForm([{ name: 'a.bin', data: bytes }], 'inputs')
 * ```
 */
export async function uploadForm(files: readonly { name: string; blob: Blob }[], dir: string): Promise<FormData> {
  const form = new FormData()
  // A trailing slash names a directory: without it the server stores a single file at
  // `path` itself (the spec's upload form), not inside a directory of that name.
  form.set('path', dir === '' || dir.endsWith('/') ? dir : `${dir}/`)
  for (const file of files) form.append('file', file.blob, file.name)
  return form
}

/**
 * Turn one {@link UploadFile} into a name and a Blob.
 *
 * @example
 * ```ts
 * const { name, blob } = await normalizeUpload({ name: 'a.txt', data: new Uint8Array([97]) })
 * ```
 */
export async function normalizeUpload(file: UploadFile): Promise<{ name: string; blob: Blob }> {
  if (typeof File !== 'undefined' && file instanceof File) return { name: file.name, blob: file }
  const { name, data } = file as { name: string; data: UploadData }
  return { name, blob: await toBlob(data) }
}
