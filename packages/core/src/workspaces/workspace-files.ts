/** The files of a workspace: browse a directory, upload files, download paths as a tar. */
import { ApiError, isApiError, type ValidationIssue } from '@berth/contract'
import { MultipartError, readMultipart } from '../internal/multipart.js'
import { clientAborted } from '../internal/input.js'
import type { ContainerRuntime, FileEntry, FileWrite } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import { toWebStream } from '../runtime/bytes.js'
import { isFilePathError } from '../runtime/errors.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'
import { fileTarget, type FileTargetOptions } from './workspace-file-target.js'
import {
  assertWritable,
  fileName,
  pathError,
  readPathField,
  refused,
  shown,
  uploadPath,
  workspacePath,
  type RelPath,
} from './workspace-paths.js'

/** A directory listing: at most `MAX_ENTRIES` (`runtime/files.ts`) entries, sorted by name. */
export interface FileListing {
  /** The directory, as an absolute path under `/workspace`. */
  path: string
  entries: FileEntry[]
  /** True when the directory holds more entries than were listed. */
  truncated: boolean
}

/** What an upload stored. */
export interface UploadResult {
  /** The directory the files went to. */
  path: string
  files: { name: string; path: string; size: number }[]
}

export interface WorkspaceFilesOptions extends FileTargetOptions {
  logger: Logger
}

const MAX_PATHS = 100

/** The runtime's path refusals as 400s naming `field`; anything else passes. */
const naming =
  (location: ValidationIssue['location'], field: string) =>
  (err: unknown): never => {
    throw isFilePathError(err) ? refused(err, location, field) : err
  }

/**
 * The files of a workspace, through the `ContainerRuntime` port's file operations on the
 * workspace's container (rooted at `/workspace`, so nothing resolving outside it is
 * served or written). A workspace whose container was released is served from its
 * volume (persistent sessions) or its kept files by a short-lived helper container from
 * the pool; without either its files went with the container, which is a clear 400.
 *
 * @example
 * ```ts
 * const listing = await files.list('usr_1', 'ws_1', '/workspace/src')
 * listing.entries // [{ name: 'app.ts', type: 'file', size: 120, mtime: '2026-…' }]
 * ```
 */
export class WorkspaceFilesService {
  constructor(private readonly o: WorkspaceFilesOptions) {}

  private runtime(): ContainerRuntime {
    return this.o.engine!.runtime
  }

  /** List a directory under `/workspace`. */
  async list(owner: string, wsId: string, path: string, signal?: AbortSignal): Promise<FileListing> {
    await this.o.workspaces.assert(owner, wsId)
    const rel = workspacePath(path, 'query', 'path')
    const target = await fileTarget(this.o, owner, wsId, signal)
    try {
      const { entries, truncated } = await this.runtime()
        .listFiles(target.engineId, WORKSPACE_DIR, rel)
        .catch(naming('query', 'path'))
      return { path: shown(rel), entries, truncated }
    } finally {
      await target.release()
    }
  }

  /**
   * Store the files of a `multipart/form-data` body under `/workspace/<path>/<filename>`.
   * Each file streams into a staging directory inside the workspace as it arrives; only
   * once the whole body was read (within the upload limit) are they moved into place, so
   * a refused or broken upload leaves nothing behind.
   */
  async upload(owner: string, wsId: string, request: Request): Promise<UploadResult> {
    await this.o.workspaces.assert(owner, wsId)
    const parts = request.body && readMultipart(readBody(request.body), request.headers.get('content-type'))
    if (!parts) {
      throw new ApiError(
        'VALIDATION_FAILED',
        'The body must be multipart/form-data with a `path` field and one or more files',
        {
          issues: [
            { location: 'headers', path: 'content-type', message: 'expected multipart/form-data with a boundary' },
          ],
        },
      )
    }
    const target = await fileTarget(this.o, owner, wsId, request.signal)
    let write: FileWrite | null = null
    try {
      let rel: RelPath | null = null
      let rawPath = ''
      const files: { name: string; size: number }[] = []
      for await (const part of parts) {
        if (part.filename === null) {
          if (part.name !== 'path') throw pathError('body', part.name, 'unknown field')
          rawPath = await readPathField(part.body)
          rel = uploadPath(rawPath, 'body', 'path')
          continue
        }
        const name = fileName(part.filename, part.name)
        write ??= await this.runtime().writeFiles(target.engineId, WORKSPACE_DIR)
        files.push({ name, size: await write.add(part.body).catch(naming('body', 'path')) })
      }
      if (rel === null) throw pathError('body', 'path', 'missing: the directory under /workspace to store the files in')
      if (files.length === 0 || !write) throw pathError('body', 'files', 'no file parts: send one or more files')
      // Into the workspace itself, the names are its top-level entries.
      if (rel === '') for (const f of files) assertWritable(f.name, 'body', 'files')
      // One file and a path that is not a directory (nor ends in "/"): the file goes to that path.
      if (files.length === 1 && rel !== '' && !rawPath.endsWith('/')) {
        const at = rel
        const stored = shown(
          await write.commitOne(at, files[0]!.name).catch((err: unknown) => {
            if (!isFilePathError(err, 'is_directory')) return naming('body', 'path')(err)
            throw pathError('body', err.path === at ? 'path' : 'files', `${shown(err.path)} is a directory`)
          }),
        )
        await target.written?.()
        return {
          path: stored.slice(0, stored.lastIndexOf('/')) || '/',
          files: [{ name: stored.slice(stored.lastIndexOf('/') + 1), path: stored, size: files[0]!.size }],
        }
      }
      await write
        .commit(
          rel,
          files.map((f) => f.name),
        )
        .catch((err: unknown) => {
          if (!isFilePathError(err, 'is_directory')) return naming('body', 'path')(err)
          throw pathError('body', 'files', `${shown(err.path)} is a directory`)
        })
      await target.written?.()
      const dir = shown(rel)
      return { path: dir, files: files.map((f) => ({ ...f, path: `${dir}/${f.name}` })) }
    } catch (err) {
      if (err instanceof MultipartError)
        throw new ApiError('VALIDATION_FAILED', `Malformed multipart body: ${err.message}`, {
          issues: [{ location: 'body', path: '', message: err.message }],
        })
      throw err
    } finally {
      await write
        ?.discard()
        .catch((err: unknown) =>
          this.o.logger.warn('could not remove an upload staging directory', { workspace: wsId, error: String(err) }),
        )
      await target.release()
    }
  }

  /**
   * A tar of the given paths (each relative to `/workspace` in the archive, e.g. `src/app`
   * and its contents), streamed from the engine's archives as they are read.
   */
  async download(
    owner: string,
    wsId: string,
    paths: string[],
    signal?: AbortSignal,
  ): Promise<ReadableStream<Uint8Array>> {
    await this.o.workspaces.assert(owner, wsId)
    if (paths.length === 0 || paths.length > MAX_PATHS) throw pathError('query', 'path', `give 1 to ${MAX_PATHS} paths`)
    const rels = paths.map((p) => workspacePath(p, 'query', 'path'))
    const target = await fileTarget(this.o, owner, wsId, signal)
    let handedOver = false
    try {
      const tar = await this.runtime().archiveFiles(target.engineId, WORKSPACE_DIR, rels).catch(naming('query', 'path'))
      const released = async function* (): AsyncGenerator<Uint8Array> {
        try {
          yield* tar as unknown as AsyncIterable<Uint8Array>
        } finally {
          await target.release()
        }
      }
      handedOver = true
      return toWebStream(released())
    } finally {
      if (!handedOver) await target.release()
    }
  }
}

/** The request body's chunks; a broken connection is a 400, the upload limit's 413 passes through. */
async function* readBody(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* body as unknown as AsyncIterable<Uint8Array>
  } catch (err) {
    if (isApiError(err)) throw err
    // Logged as a client abort, not a failure.
    throw clientAborted()
  }
}
