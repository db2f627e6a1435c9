import { randomBytes } from 'node:crypto'
import { ApiError, isApiError, validationError, type ValidationIssue } from '../errors.js'
import { MultipartError, multipartBoundary, readMultipart } from '../internal/multipart.js'
import { clientAborted } from '../internal/input.js'
import { renameTarEntries, TAR_END } from '../internal/tar.js'
import type { ContainerRuntime, ExecProcess } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import { WORKSPACE_DIR } from '../tasks/materialize.js'
import type { TaskEngine } from '../tasks/engine.js'
import type { WorkspaceRecord, WorkspacesService } from './workspaces.js'
import type { WorkspaceSnapshots } from './workspace-snapshots.js'

/** One directory entry. */
export interface FileEntry {
  name: string
  type: 'file' | 'directory' | 'symlink' | 'other'
  /** Bytes (for a symlink, the length of its target). */
  size: number
  /** Last modification, ISO-8601 UTC. */
  mtime: string
}

/** A directory listing: at most {@link MAX_ENTRIES} entries, sorted by name. */
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

export interface WorkspaceFilesOptions {
  workspaces: WorkspacesService
  engine?: TaskEngine | undefined
  logger: Logger
  /** How long to wait for a helper container when the pool is full (default 30 s). */
  helperTimeoutMs?: number
  /** The kept files of released workspaces without a volume. */
  snapshots?: WorkspaceSnapshots | undefined
}

/** Entries a listing returns at most. */
export const MAX_ENTRIES = 10_000
/** Output of one listing command at most (names and sizes of `MAX_ENTRIES`-plus entries). */
const MAX_LISTING_BYTES = 16 * 1024 * 1024
const MAX_PATH = 4096
const MAX_PATHS = 100

/** A path argument as the scripts take it: relative to `/workspace`, '' for itself. */
type RelPath = string

/**
 * Shell helpers every script starts with; they run inside the container with the
 * workspace as working directory, so symlinks are resolved by the container's own view of
 * its filesystem. `resolve REL` sets `R` to the real path of `./REL` (`.` for '') or
 * fails: 2 missing (or a dangling link), 3 resolving outside the workspace. `mkdirs REL`
 * creates missing directories one level at a time, resolving every existing level first,
 * so nothing is ever created through a link that points out; 4: not a directory.
 */
const PRELUDE = `
root=$(pwd -P) || exit 70
inside() { case "$1" in "$root"|"$root"/*) return 0;; esac; return 1; }
resolve() {
  t=./$1; [ -n "$1" ] || t=.
  [ -e "$t" ] || return 2
  R=$(realpath "$t" 2>/dev/null && echo x) || return 3
  R=\${R%?x}
  inside "$R" || return 3
}
mkdirs() {
  cur=.; rest=$1
  while [ -n "$rest" ]; do
    c=\${rest%%/*}
    if [ "$c" = "$rest" ]; then rest=; else rest=\${rest#*/}; fi
    cur=$cur/$c
    if [ -e "$cur" ] || [ -L "$cur" ]; then
      resolve "\${cur#./}" || return $?
      [ -d "$R" ] || return 4
    else
      mkdir "$cur" || return 5
    fi
  done
  resolve "$1" || return $?
  [ -d "$R" ] || return 4
}
`

/** `$1` a directory: NUL-terminated names, an empty name, then `stat` lines (mode, size, mtime, name). */
const LIST_SCRIPT = `${PRELUDE}
resolve "$1" || exit $?
[ -d "$R" ] || exit 4
cd "$R" || exit 2
list() { for f in * .[!.]* ..?*; do if [ -e "$f" ] || [ -L "$f" ]; then printf './%s\\0' "$f"; fi; done; }
list
printf '\\0'
list | xargs -0 -r stat -c '%f %s %Y %n' 2>/dev/null
exit 0`

/** Every argument resolved: the root, then per path `ok\\0<real path>\\0` or `<code>\\0\\0`. */
const RESOLVE_SCRIPT = `${PRELUDE}
printf '%s\\0' "$root"
for p in "$@"; do
  if resolve "$p"; then printf 'ok\\0%s\\0' "$R"; else printf '%s\\0\\0' "$?"; fi
done`

/** `$1` a new staging directory under the workspace: created safely, its real path printed. */
const STAGE_SCRIPT = `${PRELUDE}
mkdirs "$1" || exit $?
printf '%s' "$R"`

/** `$1` the staging dir, `$2` the destination, then the file names (staged as 0, 1, ...). */
const COMMIT_SCRIPT = `${PRELUDE}
stage=$1; dest=$2; shift 2
mkdirs "$dest" || exit $?
d=$R
i=0
for name in "$@"; do
  if [ -d "$d/$name" ] && [ ! -L "$d/$name" ]; then printf '%s' "$i"; exit 6; fi
  i=$((i+1))
done
i=0
for name in "$@"; do
  mv -fT "$stage/$i" "$d/$name" || exit 7
  i=$((i+1))
done
rm -rf "$stage"
exit 0`

/**
 * One file to `$2`: into it when `$2` is an existing directory (as `$2/$3`), else at `$2`
 * itself (its parent created). Prints the stored path relative to the workspace.
 */
const COMMIT_ONE_SCRIPT = `${PRELUDE}
stage=$1; dest=$2; name=$3
if [ -d "./$dest" ]; then
  mkdirs "$dest" || exit $?
  out="$dest/$name"; field=files
else
  case "$dest" in */*) parent=\${dest%/*};; *) parent=;; esac
  name=\${dest##*/}
  mkdirs "$parent" || exit $?
  p=$R
  # An existing name (a link too) must resolve inside the workspace.
  if [ -e "./$dest" ] || [ -L "./$dest" ]; then resolve "$dest" || exit $?; fi
  R=$p
  out=$dest; field=path
fi
d=$R
if [ -d "$d/$name" ] && [ ! -L "$d/$name" ]; then printf '%s' "$field"; exit 6; fi
mv -fT "$stage/0" "$d/$name" || exit 7
rm -rf "$stage"
printf '%s' "$out"`

const TYPE_BITS: Record<number, FileEntry['type']> = { 0x8000: 'file', 0x4000: 'directory', 0xa000: 'symlink' }

/** Where a workspace's files are right now, and how to let go of it. */
interface Target {
  engineId: string
  release(): Promise<void>
  /** After a write: keep what changed (a helper holding kept files copies them back). */
  written?(): Promise<void>
}

const shown = (rel: RelPath) => (rel ? `${WORKSPACE_DIR}/${rel}` : WORKSPACE_DIR)

function pathError(location: ValidationIssue['location'], field: string, message: string): ApiError {
  return validationError([{ location, path: field, message }])
}

/**
 * A caller's path under `/workspace` as a relative path ('' for the workspace itself), or
 * a 400 naming `field`: NUL bytes, `..` segments and absolute paths elsewhere are refused
 * before anything reaches the container (symlinks are resolved there, see the scripts).
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
    if (rest !== WORKSPACE_DIR && !rest.startsWith(`${WORKSPACE_DIR}/`)) throw pathError(location, field, `must be under ${WORKSPACE_DIR}`)
    rest = rest.slice(WORKSPACE_DIR.length)
  }
  const parts = rest.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw pathError(location, field, 'must not contain .. segments')
  if (parts.some((p) => Buffer.byteLength(p) > 255)) throw pathError(location, field, 'has a segment longer than 255 bytes')
  return parts.join('/')
}

/** A file name from an upload: one plain name, no separators or control characters. */
function fileName(name: string, field: string): string {
  const ok = name !== '' && name !== '.' && name !== '..' && !/[/\u0000-\u001f\u007f]/.test(name) && Buffer.byteLength(name) <= 255
  if (!ok) throw pathError('body', field, `file name ${JSON.stringify(name.slice(0, 100))} must be a plain name: no "/", no control characters, not "." or "..", at most 255 bytes`)
  return name
}

async function collect(proc: ExecProcess, max: number): Promise<{ exitCode: number | null; stdout: Uint8Array; stderr: string }> {
  const out: Uint8Array[] = []
  let size = 0
  let over = false
  const stdout = (async () => {
    for await (const c of proc.stdout) {
      size += c.length
      if (size > max) {
        if (!over) await proc.kill()
        over = true
      } else out.push(c)
    }
  })()
  let stderr = ''
  const err = (async () => {
    for await (const c of proc.stderr) stderr = (stderr + Buffer.from(c).toString('utf8')).slice(-2000)
  })()
  const [{ exitCode }] = await Promise.all([proc.exit, stdout, err])
  if (over) throw new ApiError('VALIDATION_FAILED', 'The directory is too large to list', { issues: [{ location: 'query', path: 'path', message: 'too many entries to list' }] })
  return { exitCode, stdout: Buffer.concat(out), stderr }
}

/**
 * The files of a workspace: browse a directory, upload files, download paths as a tar.
 * Everything runs against the workspace's container through the `ContainerRuntime` port:
 * small shell scripts (`sh`, `realpath`, `stat`, `xargs`, `mv`: busybox or coreutils)
 * resolve every path inside the container and refuse anything that resolves outside
 * `/workspace`; archives come from the engine. A workspace whose container was released
 * is served from its volume (persistent sessions) by a short-lived helper container from
 * the pool; without a volume its files went with the container, which is a clear 400.
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

  /** The container holding the workspace's files: its own, a helper on its volume, or a 400. */
  private async target(owner: string, wsId: string, signal?: AbortSignal): Promise<Target> {
    const ws = await this.o.workspaces.records.get(owner, wsId)
    const engine = this.o.engine
    if (engine && ws.container_id) {
      const c = engine.pool.list().find((x) => x.id === ws.container_id)
      if (c) return { engineId: c.engine_id, release: async () => {} }
    }
    if (engine && ws.volume) return this.helper(engine, ws, signal)
    const snapshots = this.o.snapshots
    if (engine && snapshots && (await snapshots.has(owner, wsId))) {
      const target = await this.helper(engine, ws, signal)
      try {
        await snapshots.restore(engine.runtime, target.engineId, owner, wsId)
      } catch (err) {
        await target.release()
        throw err
      }
      return { ...target, written: async () => void (await snapshots.save(engine.runtime, target.engineId, owner, wsId)) }
    }
    throw new ApiError(
      'VALIDATION_FAILED',
      ws.status === 'starting'
        ? `Workspace ${ws.id} has no container yet: its first task has not started. Try again once it runs.`
        : `Workspace ${ws.id} has no files to serve: its container was released and its kept files expired (or were too large to keep).`,
      { issues: [{ location: 'params', path: 'id', message: 'the workspace has no container and no volume' }] },
    )
  }

  /** A short-lived container from the pool image with the workspace's volume mounted. */
  private async helper(engine: TaskEngine, ws: WorkspaceRecord, signal?: AbortSignal): Promise<Target> {
    const timeout = AbortSignal.timeout(this.o.helperTimeoutMs ?? 30_000)
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout
    try {
      const lease = await engine.pool.claim({
        owner_id: ws.owner_id,
        purpose: 'batch',
        signal: abort,
        ...(ws.volume && { spec: { mounts: [{ type: 'volume' as const, source: ws.volume, target: WORKSPACE_DIR }] } }),
        labels: { 'berth.files': ws.id },
      })
      return { engineId: lease.container.engine_id, release: () => lease.release() }
    } catch (err) {
      if (!abort.aborted) throw err
      throw new ApiError('CONTAINER_FAILED', `No container was free to open workspace ${ws.id}'s volume in time`, { reason: 'unreachable' })
    }
  }

  private async sh(engineId: string, script: string, args: string[], extra: { stdin?: AsyncIterable<Uint8Array> } = {}) {
    const proc = await this.runtime().exec(engineId, {
      cmd: ['/bin/sh', '-c', script, 'berth-files', ...args],
      cwd: WORKSPACE_DIR,
      ...(extra.stdin && { stdin: extra.stdin }),
    })
    return collect(proc, MAX_LISTING_BYTES)
  }

  /** A script's exit code as the answer: path problems are 400s naming `field`, anything else the container's. */
  private fail(
    result: { exitCode: number | null; stderr: string },
    rel: RelPath,
    location: ValidationIssue['location'],
    field: string,
  ): never {
    const at = shown(rel)
    switch (result.exitCode) {
      case 2:
        throw pathError(location, field, `${at} does not exist`)
      case 3:
        throw pathError(location, field, `${at} resolves outside ${WORKSPACE_DIR}`)
      case 4:
        throw pathError(location, field, `${at} is not a directory`)
      default:
        throw new ApiError('CONTAINER_FAILED', `Working with the files in the container failed (exit code ${result.exitCode ?? 'unknown'})`, {
          reason: 'engine_error',
          stderr_tail: result.stderr.slice(-500),
        })
    }
  }

  /** List a directory under `/workspace`. */
  async list(owner: string, wsId: string, path: string, signal?: AbortSignal): Promise<FileListing> {
    await this.o.workspaces.assert(owner, wsId)
    const rel = workspacePath(path, 'query', 'path')
    const target = await this.target(owner, wsId, signal)
    try {
      const res = await this.sh(target.engineId, LIST_SCRIPT, [rel])
      if (res.exitCode !== 0) this.fail(res, rel, 'query', 'path')
      const { entries, truncated } = parseListing(Buffer.from(res.stdout).toString('utf8'))
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
    const boundary = multipartBoundary(request.headers.get('content-type'))
    if (!boundary || !request.body) {
      throw new ApiError('VALIDATION_FAILED', 'The body must be multipart/form-data with a `path` field and one or more files', {
        issues: [{ location: 'headers', path: 'content-type', message: 'expected multipart/form-data with a boundary' }],
      })
    }
    const target = await this.target(owner, wsId, request.signal)
    let stage: string | null = null
    try {
      let rel: RelPath | null = null
      let rawPath = ''
      const files: { name: string; size: number }[] = []
      const stageRel = `.berth/uploads/${randomBytes(8).toString('hex')}`
      for await (const part of readMultipart(readBody(request.body), boundary)) {
        if (part.filename === null) {
          if (part.name !== 'path') throw pathError('body', part.name, 'unknown field')
          rawPath = await readField(part.body, MAX_PATH * 4)
          rel = workspacePath(rawPath, 'body', 'path')
          continue
        }
        const name = fileName(part.filename, part.name)
        if (stage === null) {
          const made = await this.sh(target.engineId, STAGE_SCRIPT, [stageRel])
          if (made.exitCode !== 0) this.fail(made, stageRel, 'body', 'path')
          stage = Buffer.from(made.stdout).toString('utf8')
        }
        files.push({ name, size: await this.writeStaged(target.engineId, `${stage}/${files.length}`, part.body) })
      }
      if (rel === null) throw pathError('body', 'path', 'missing: the directory under /workspace to store the files in')
      if (files.length === 0) throw pathError('body', 'files', 'no file parts: send one or more files')
      // One file and a path that is not a directory (nor ends in "/"): the file goes to that path.
      if (files.length === 1 && rel !== '' && !rawPath.endsWith('/')) {
        const one = await this.sh(target.engineId, COMMIT_ONE_SCRIPT, [stage!, rel, files[0]!.name])
        if (one.exitCode === 6) {
          const field = Buffer.from(one.stdout).toString('utf8') === 'files' ? 'files' : 'path'
          throw pathError('body', field, `${field === 'files' ? `${shown(rel)}/${files[0]!.name}` : shown(rel)} is a directory`)
        }
        if (one.exitCode !== 0) this.fail(one, rel, 'body', 'path')
        stage = null
        await target.written?.()
        const stored = shown(Buffer.from(one.stdout).toString('utf8'))
        return { path: stored.slice(0, stored.lastIndexOf('/')) || '/', files: [{ name: stored.slice(stored.lastIndexOf('/') + 1), path: stored, size: files[0]!.size }] }
      }
      const res = await this.sh(target.engineId, COMMIT_SCRIPT, [stage!, rel, ...files.map((f) => f.name)])
      if (res.exitCode === 6) {
        const name = files[Number(Buffer.from(res.stdout).toString('utf8'))]?.name ?? ''
        throw pathError('body', 'files', `${shown(rel)}/${name} is a directory`)
      }
      if (res.exitCode !== 0) this.fail(res, rel, 'body', 'path')
      stage = null
      await target.written?.()
      const dir = shown(rel)
      return { path: dir, files: files.map((f) => ({ ...f, path: `${dir}/${f.name}` })) }
    } catch (err) {
      if (err instanceof MultipartError) throw new ApiError('VALIDATION_FAILED', `Malformed multipart body: ${err.message}`, { issues: [{ location: 'body', path: '', message: err.message }] })
      throw err
    } finally {
      if (stage !== null) {
        await this.sh(target.engineId, 'rm -rf "$1"', [stage]).catch((err: unknown) =>
          this.o.logger.warn('could not remove an upload staging directory', { workspace: wsId, error: String(err) }),
        )
      }
      await target.release()
    }
  }

  /** Stream one file part into `path` in the container; resolves its size. */
  private async writeStaged(engineId: string, path: string, body: AsyncIterable<Uint8Array>): Promise<number> {
    let size = 0
    let complete = false
    let failure: unknown = null
    // The runtime closes stdin early when its source throws: keep the reason to rethrow.
    const counted = (async function* () {
      try {
        for await (const chunk of body) {
          size += chunk.length
          yield chunk
        }
        complete = true
      } catch (err) {
        failure = err
        throw err
      }
    })()
    const res = await this.sh(engineId, 'exec cat > "$1"', [path], { stdin: counted })
    if (failure) throw failure
    if (res.exitCode !== 0 || !complete) {
      throw new ApiError('CONTAINER_FAILED', `Writing an uploaded file in the container failed (exit code ${res.exitCode ?? 'unknown'})`, {
        reason: 'engine_error',
        stderr_tail: res.stderr.slice(-500),
      })
    }
    return size
  }

  /**
   * A tar of the given paths (each relative to `/workspace` in the archive, e.g. `src/app`
   * and its contents), streamed from the engine's archives as they are read.
   */
  async download(owner: string, wsId: string, paths: string[], signal?: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    await this.o.workspaces.assert(owner, wsId)
    if (paths.length === 0 || paths.length > MAX_PATHS) throw pathError('query', 'path', `give 1 to ${MAX_PATHS} paths`)
    const rels = paths.map((p) => workspacePath(p, 'query', 'path'))
    const target = await this.target(owner, wsId, signal)
    let handedOver = false
    try {
      const res = await this.sh(target.engineId, RESOLVE_SCRIPT, rels)
      if (res.exitCode !== 0) this.fail(res, '', 'query', 'path')
      const fields = Buffer.from(res.stdout).toString('utf8').split('\0')
      const root = fields[0]!
      const real: string[] = []
      for (let i = 0; i < rels.length; i++) {
        const [status, path] = [fields[1 + 2 * i], fields[2 + 2 * i]]
        if (status !== 'ok') this.fail({ exitCode: Number(status), stderr: res.stderr }, rels[i]!, 'query', 'path')
        // The container's own path (the local runtime's realpath is a host path).
        real.push(WORKSPACE_DIR + path!.slice(root.length))
      }
      const runtime = this.runtime()
      const parts = async function* (): AsyncGenerator<Uint8Array> {
        try {
          for (let i = 0; i < real.length; i++) {
            const base = real[i]!.slice(real[i]!.lastIndexOf('/') + 1)
            const as = rels[i] || '.'
            const tar = (await runtime.getArchive(target.engineId, real[i]!)) as unknown as AsyncIterable<Uint8Array>
            yield* renameTarEntries(tar, (name) => {
              const plain = name.replace(/^\.\//, '').replace(/\/$/, '')
              if (plain !== base && !plain.startsWith(`${base}/`)) return null
              return as + plain.slice(base.length) + (name.endsWith('/') ? '/' : '')
            })
          }
          yield TAR_END
        } finally {
          await target.release()
        }
      }
      const it = parts()
      handedOver = true
      return new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await it.next()
          if (done) controller.close()
          else controller.enqueue(value)
        },
        async cancel() {
          await it.return(undefined)
        },
      })
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

/** A text field's value, at most `max` bytes. */
async function readField(body: AsyncIterable<Uint8Array>, max: number): Promise<string> {
  const parts: Uint8Array[] = []
  let size = 0
  for await (const c of body) {
    size += c.length
    if (size > max) throw pathError('body', 'path', `must be at most ${MAX_PATH} characters`)
    parts.push(c)
  }
  return Buffer.concat(parts).toString('utf8')
}

/** The listing script's output → entries sorted by name, at most {@link MAX_ENTRIES}. */
function parseListing(out: string): { entries: FileEntry[]; truncated: boolean } {
  const end = out.indexOf('\0\0')
  const names = end < 0 ? [] : out.slice(0, end).split('\0').map((n) => n.slice(2))
  let at = end < 0 ? out.length : end + 2
  // Fewer stat lines than names when entries vanished meanwhile: match each line to its name.
  const entries: FileEntry[] = []
  for (const name of names) {
    const m = /^([0-9a-f]+) (\d+) (-?\d+) /.exec(out.slice(at, at + 64))
    if (!m || !out.startsWith(`./${name}\n`, at + m[0].length)) continue
    at += m[0].length + name.length + 3
    const mode = parseInt(m[1]!, 16)
    entries.push({
      name,
      type: TYPE_BITS[mode & 0xf000] ?? 'other',
      size: Number(m[2]),
      mtime: new Date(Number(m[3]) * 1000).toISOString(),
    })
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return { entries: entries.slice(0, MAX_ENTRIES), truncated: entries.length > MAX_ENTRIES }
}
