/** Caller paths and file names for the workspace file routes, and the 400s that name them. */
import { ApiError, validationError, type ValidationIssue } from '@berth/contract'
import type { FilePathError } from '../runtime/errors.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'

const MAX_PATH = 4096

/** A path as the file operations take it: relative to `/workspace`, '' for itself. */
export type RelPath = string

/**
 * `rel` as the caller sees it: an absolute path under `/workspace`.
 *
 * @example
 * ```ts
 * shown('src/app') // '/workspace/src/app'
 * ```
 */
export const shown = (rel: RelPath): string => (rel ? `${WORKSPACE_DIR}/${rel}` : WORKSPACE_DIR)

/**
 * A 400 `VALIDATION_FAILED` naming one field.
 *
 * @example
 * ```ts
 * throw pathError('query', 'path', 'must be under /workspace')
 * ```
 */
export function pathError(location: ValidationIssue['location'], field: string, message: string): ApiError {
  return validationError([{ location, path: field, message }])
}

/**
 * A caller's path under `/workspace` as a relative path ('' for the workspace itself), or
 * a 400 naming `field`: NUL bytes, `..` segments and absolute paths elsewhere are refused
 * before anything reaches the container (symlinks are resolved there, by the runtime's
 * file operations).
 *
 * @example
 * ```ts
 * workspacePath('/workspace/src/./app', 'query', 'path') // 'src/app'
 * workspacePath('../etc', 'query', 'path') // throws 400 VALIDATION_FAILED
 * ```
 */
export function workspacePath(input: string, location: ValidationIssue['location'], field: string): RelPath {
  if (input.includes('\0')) throw pathError(location, field, 'must not contain NUL bytes')
  if (input.length > MAX_PATH) throw pathError(location, field, `must be at most ${MAX_PATH} characters`)
  let rest = input
  if (rest.startsWith('/')) {
    if (rest !== WORKSPACE_DIR && !rest.startsWith(`${WORKSPACE_DIR}/`))
      throw pathError(location, field, `must be under ${WORKSPACE_DIR}`)
    rest = rest.slice(WORKSPACE_DIR.length)
  }
  const parts = rest.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw pathError(location, field, 'must not contain .. segments')
  if (parts.some((p) => Buffer.byteLength(p) > 255))
    throw pathError(location, field, 'has a segment longer than 255 bytes')
  return parts.join('/')
}

/**
 * Control characters (C0, DEL, C1), bidirectional formatting characters (U+061C, U+200E,
 * U+200F, U+202A–U+202E, U+2066–U+2069) and the line and paragraph separators: a name
 * holding one shows as something it is not (`report\u202Efdp.exe` reads "reportexe.pdf")
 * or breaks a listing's lines.
 */
const UNSAFE_CHARS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

/**
 * Top-level names of the workspace that uploads never write: Berth's own directory (the
 * runner's events, a session's conversation, upload staging) and ext4's `lost+found`, which
 * only a disk made by an earlier version can still show there (see `runtime/disks.ts`).
 */
const RESERVED: Record<string, string> = {
  '.berth': "is Berth's own directory",
  'lost+found': "belongs to the disk's filesystem",
}

/**
 * Whether `name` is one a file may be uploaded as: a single name, not "." or "..", with no
 * "/", control or bidirectional formatting character, at most 255 bytes.
 *
 * @example
 * ```ts
 * isPlainName('notes.txt') // true
 * isPlainName('report\u202Efdp.exe') // false
 * ```
 */
export function isPlainName(name: string): boolean {
  return (
    name !== '' &&
    name !== '.' &&
    name !== '..' &&
    !name.includes('/') &&
    !UNSAFE_CHARS.test(name) &&
    Buffer.byteLength(name) <= 255
  )
}

/**
 * A file name from an upload ({@link isPlainName}), or a 400 naming `field`.
 *
 * @example
 * ```ts
 * fileName('notes.txt', 'file') // 'notes.txt'; '../x' throws a 400 naming `file`
 * ```
 */
export function fileName(name: string, field: string): string {
  if (!isPlainName(name))
    throw pathError(
      'body',
      field,
      `file name ${JSON.stringify(name.slice(0, 100))} must be a plain name: no "/", no control or bidirectional formatting characters, not "." or "..", at most 255 bytes`,
    )
  return name
}

/**
 * The directory (or file) an upload writes to, as {@link workspacePath} reads it, or a 400
 * naming `field`: no segment with a control or bidirectional formatting character (the
 * directories it makes get those names), and nothing under a reserved top-level name
 * (see {@link assertWritable}).
 *
 * @example
 * ```ts
 * uploadPath('/workspace/src/', 'body', 'path') // 'src'
 * uploadPath('/workspace/.berth/events', 'body', 'path') // throws 400 VALIDATION_FAILED
 * ```
 */
export function uploadPath(input: string, location: ValidationIssue['location'], field: string): RelPath {
  const rel = workspacePath(input, location, field)
  if (UNSAFE_CHARS.test(rel))
    throw pathError(location, field, 'must not contain control or bidirectional formatting characters')
  assertWritable(rel, location, field)
  return rel
}

/**
 * A 400 naming `field` when `rel` is, or lies under, a top-level name uploads never write:
 * `/workspace/.berth` (Berth's own) or `/workspace/lost+found` (the disk's filesystem's).
 *
 * @example
 * ```ts
 * assertWritable('notes.txt', 'body', 'files') // passes
 * assertWritable('.berth', 'body', 'files') // throws 400 VALIDATION_FAILED
 * ```
 */
export function assertWritable(rel: RelPath, location: ValidationIssue['location'], field: string): void {
  const top = rel.split('/')[0]!
  const why = Object.hasOwn(RESERVED, top) ? RESERVED[top] : undefined
  if (why) throw pathError(location, field, `${shown(top)} ${why}: uploads cannot write there`)
}

/**
 * The `path` field's value of an upload, at most {@link MAX_PATH} (times 4) bytes.
 *
 * @example
 * ```ts
 * const raw = await readPathField(part.body) // '/workspace/src/'
 * ```
 */
export async function readPathField(body: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Uint8Array[] = []
  let size = 0
  for await (const c of body) {
    size += c.length
    if (size > MAX_PATH * 4) throw pathError('body', 'path', `must be at most ${MAX_PATH} characters`)
    parts.push(c)
  }
  return Buffer.concat(parts).toString('utf8')
}

/**
 * A runtime's refusal of a path as the 400 the files routes answer, naming `field`.
 *
 * @example
 * ```ts
 * await runtime.listFiles(id, '/workspace', rel).catch((err) => { throw isFilePathError(err) ? refused(err, 'query', 'path') : err })
 * ```
 */
export function refused(err: FilePathError, location: ValidationIssue['location'], field: string): ApiError {
  const at = shown(err.path)
  switch (err.problem) {
    case 'missing':
      return pathError(location, field, `${at} does not exist`)
    case 'outside':
      return pathError(location, field, `${at} resolves outside ${WORKSPACE_DIR}`)
    case 'not_directory':
      return pathError(location, field, `${at} is not a directory`)
    case 'is_directory':
      return pathError(location, field, `${at} is a directory`)
    case 'too_large':
      return new ApiError('VALIDATION_FAILED', 'The directory is too large to list', {
        issues: [{ location, path: field, message: 'too many entries to list' }],
      })
  }
}
