/** The error every `ContainerRuntime` operation rejects with, and the file operations' path errors. */
import { ApiError, isApiError } from '@berth/contract'

/** Why a container operation failed; carried as `details.reason`. */
export type ContainerFailure =
  /** The engine did not answer (socket missing, refused, timed out). */
  | 'unreachable'
  /** No such container, image, path or volume. */
  | 'not_found'
  /** The container is not running (exec into a stopped container). */
  | 'not_running'
  /** The container died while a command ran in it. */
  | 'died'
  /** The engine answered with an error. */
  | 'engine_error'
  /** The runtime cannot give what the spec asks (an isolation level it lacks). */
  | 'unsupported'

/**
 * The error every runtime operation rejects with: an {@link ApiError} with code
 * `CONTAINER_FAILED` (502) and `details: { reason, runtime?, op?, id?, ... }`.
 *
 * @example
 * ```ts
 * throw new ContainerError('not_found', 'No such container ctr_1', { id: 'ctr_1' })
 * ```
 */
export class ContainerError extends ApiError {
  readonly reason: ContainerFailure

  constructor(reason: ContainerFailure, message: string, details: Record<string, unknown> = {}) {
    super('CONTAINER_FAILED', message, { reason, ...details })
    this.reason = reason
  }
}

/**
 * True for a `CONTAINER_FAILED` error, optionally of one reason; works across module copies.
 *
 * @example
 * ```ts
 * try { await rt.inspect(id) } catch (err) { if (isContainerError(err, 'not_found')) return null; throw err }
 * ```
 */
export function isContainerError(err: unknown, reason?: ContainerFailure): err is ContainerError {
  if (!isApiError(err) || err.code !== 'CONTAINER_FAILED') return false
  return reason === undefined || err.details?.reason === reason
}

/** Why a file operation refused a path (see {@link FilePathError}). */
export type FilePathProblem =
  /** Nothing there (a dangling link included). */
  | 'missing'
  /** It resolves (through `..` or a symbolic link) outside the operation's root. */
  | 'outside'
  /** A directory was needed. */
  | 'not_directory'
  /** A file was needed, or a file would replace a directory. */
  | 'is_directory'
  /** More than the operation returns at most (a listing's output, a file read whole). */
  | 'too_large'

/**
 * A path a file operation of the `ContainerRuntime` port refused: a 400 `VALIDATION_FAILED`
 * with `details: { reason, path }`, `path` as the caller gave it. Callers that know which
 * field the path came from re-word it (the workspace file routes do).
 *
 * @example
 * ```ts
 * throw new FilePathError('missing', 'src/app.ts')
 * ```
 */
export class FilePathError extends ApiError {
  readonly problem: FilePathProblem
  readonly path: string
  /** For a problem with one of several names (a `commit`), its index. */
  readonly index: number | undefined

  constructor(problem: FilePathProblem, path: string, index?: number) {
    super('VALIDATION_FAILED', `${path || '.'} ${PROBLEM_TEXT[problem]}`, { reason: problem, path, index })
    this.problem = problem
    this.path = path
    this.index = index
  }
}

const PROBLEM_TEXT: Record<FilePathProblem, string> = {
  missing: 'does not exist',
  outside: 'resolves outside the root',
  not_directory: 'is not a directory',
  is_directory: 'is a directory',
  too_large: 'is too large',
}

/**
 * True for a {@link FilePathError}, optionally of one problem; works across module copies.
 *
 * @example
 * ```ts
 * const bytes = await rt.readFile(id, '/workspace', 'notes.txt').catch((err) => (isFilePathError(err, 'missing') ? null : Promise.reject(err)))
 * ```
 */
export function isFilePathError(err: unknown, problem?: FilePathProblem): err is FilePathError {
  if (!isApiError(err) || err.code !== 'VALIDATION_FAILED' || typeof err.details?.path !== 'string') return false
  const reason = err.details.reason
  return problem === undefined ? typeof reason === 'string' : reason === problem
}
