/**
 * The `ContainerRuntime` port's file operations built on its `exec` and `getArchive`, for
 * any runtime whose containers have a POSIX shell: small scripts (`file-scripts.ts`)
 * resolve every path inside the container, in its own view of its filesystem, and refuse
 * what resolves outside the root. Docker, Podman and the local runtime all use it.
 */
import { randomBytes } from 'node:crypto'
import { repackTar, type TarSource } from '../internal/tar-repack.js'
import type {
  ContainerRuntime,
  ExecProcess,
  FileEntry,
  DirectoryListing,
  FileWrite,
} from '../ports/container-runtime.js'
import { toWebStream } from './bytes.js'
import { ContainerError, FilePathError, type FilePathProblem } from './errors.js'
import {
  COMMIT_ONE_SCRIPT,
  COMMIT_SCRIPT,
  LIST_SCRIPT,
  READ_SCRIPT,
  RESOLVE_SCRIPT,
  STAGE_SCRIPT,
} from './file-scripts.js'

/** What the file operations need from a runtime. */
export type FileOperationsBase = Pick<ContainerRuntime, 'exec' | 'getArchive'>
/** The file operations of the port. */
export type FileOperations = Pick<ContainerRuntime, 'listFiles' | 'readFile' | 'archiveFiles' | 'writeFiles'>

/** Entries a listing returns by default. */
export const MAX_ENTRIES = 10_000
/** Output of one listing command at most (names and sizes of `MAX_ENTRIES`-plus entries). */
const MAX_LISTING_BYTES = 16 * 1024 * 1024
const MAX_READ_BYTES = 64 * 1024 * 1024
/** Where `writeFiles` stages, under the root. */
const STAGING = '.berth/uploads'

const PROBLEMS: Record<number, FilePathProblem> = { 2: 'missing', 3: 'outside', 4: 'not_directory', 6: 'is_directory' }
// The file-type bits of `st_mode`: S_IFREG (0x8000), S_IFDIR (0x4000), S_IFLNK (0xa000), written in decimal.
const TYPE_BITS: Record<number, FileEntry['type']> = { 32768: 'file', 16384: 'directory', 40960: 'symlink' }

interface Run {
  exitCode: number | null
  stdout: Uint8Array
  stderr: string
  /** More output than allowed: the command was killed. */
  over: boolean
}

/**
 * `path` relative to `root` ('' for the root itself): absolute paths must lie under
 * `root`, `..` segments are refused (`outside`).
 *
 * @example
 * ```ts
 * relativePath('/workspace', '/workspace/src/./app') // 'src/app'
 * relativePath('/workspace', 'src/../..') // throws FilePathError 'outside'
 * ```
 */
export function relativePath(root: string, path: string): string {
  if (path.includes('\0')) throw new FilePathError('missing', path)
  const base = root.replace(/\/+$/, '')
  let rest = path
  if (rest.startsWith('/')) {
    if (rest !== base && !rest.startsWith(`${base}/`)) throw new FilePathError('outside', path)
    rest = rest.slice(base.length)
  }
  const parts = rest.split('/').filter((p) => p !== '' && p !== '.')
  if (parts.includes('..')) throw new FilePathError('outside', path)
  return parts.join('/')
}

/**
 * The four file operations over a runtime's `exec` and `getArchive`.
 *
 * @example
 * ```ts
 * const rt = { ...base, ...execFileOperations(base) }
 * await rt.listFiles(id, '/workspace', 'src') // { entries: [...], truncated: false }
 * ```
 */
export function execFileOperations(rt: FileOperationsBase): FileOperations {
  const sh = async (
    id: string,
    root: string,
    script: string,
    args: string[],
    extra: { stdin?: AsyncIterable<Uint8Array>; max?: number } = {},
  ) => {
    const proc = await rt.exec(id, {
      cmd: ['/bin/sh', '-c', script, 'berth-files', ...args],
      cwd: root,
      stdin: extra.stdin,
    })
    return collect(proc, extra.max ?? MAX_LISTING_BYTES)
  }

  return {
    async listFiles(id, root, path, options = {}): Promise<DirectoryListing> {
      const rel = relativePath(root, path)
      const res = await sh(id, root, LIST_SCRIPT, [rel])
      if (res.over) throw new FilePathError('too_large', rel)
      if (res.exitCode !== 0) fail(res, rel)
      return parseListing(Buffer.from(res.stdout).toString('utf8'), options.maxEntries ?? MAX_ENTRIES)
    },

    async readFile(id, root, path, options = {}) {
      const rel = relativePath(root, path)
      const res = await sh(id, root, READ_SCRIPT, [rel], { max: options.maxBytes ?? MAX_READ_BYTES })
      if (res.over) throw new FilePathError('too_large', rel)
      if (res.exitCode !== 0) fail(res, rel)
      return res.stdout
    },

    async archiveFiles(id, root, paths) {
      const rels = paths.map((p) => relativePath(root, p))
      const res = await sh(id, root, RESOLVE_SCRIPT, rels)
      if (res.exitCode !== 0) fail(res, '')
      const fields = Buffer.from(res.stdout).toString('utf8').split('\0')
      const realRoot = fields[0]!
      const real = rels.map((rel, i) => {
        const [status, at] = [fields[1 + 2 * i], fields[2 + 2 * i]]
        if (status !== 'ok') fail({ exitCode: Number(status), stderr: res.stderr }, rel)
        return inContainer(root, realRoot, at!)
      })
      // Each path's archive is asked for when the previous one was copied.
      const sources = async function* (): AsyncGenerator<TarSource> {
        for (let i = 0; i < real.length; i++) {
          const name = real[i]!.slice(real[i]!.lastIndexOf('/') + 1)
          const as = rels[i] || '.'
          const archive = (await rt.getArchive(id, real[i]!)) as unknown as AsyncIterable<Uint8Array>
          yield {
            archive,
            rename: (entry) => {
              const plain = entry.replace(/^\.\//, '').replace(/\/$/, '')
              if (plain !== name && !plain.startsWith(`${name}/`)) return null
              return as + plain.slice(name.length) + (entry.endsWith('/') ? '/' : '')
            },
          }
        }
      }
      return toWebStream(repackTar(sources()))
    },

    async writeFiles(id, root): Promise<FileWrite> {
      const stageRel = `${STAGING}/${randomBytes(8).toString('hex')}`
      let stage: string | null = null
      let count = 0
      const run = async (script: string, args: string[], rel: string) => {
        const res = await sh(id, root, script, args)
        if (res.exitCode === 6) return res
        if (res.exitCode !== 0) fail(res, rel)
        return res
      }
      return {
        async add(body) {
          if (stage === null) {
            const [realRoot, real] = Buffer.from((await run(STAGE_SCRIPT, [stageRel], stageRel)).stdout)
              .toString('utf8')
              .split('\0')
            stage = inContainer(root, realRoot!, real!)
          }
          return writeStaged(`${stage}/${count++}`, body)
        },
        async commit(dir, names) {
          const rel = relativePath(root, dir)
          const res = await run(COMMIT_SCRIPT, [stage!, rel, ...names], rel)
          if (res.exitCode === 6) {
            const i = Number(Buffer.from(res.stdout).toString('utf8'))
            throw new FilePathError('is_directory', `${rel ? `${rel}/` : ''}${names[i] ?? ''}`, i)
          }
          stage = null
        },
        async commitOne(path, name) {
          const rel = relativePath(root, path)
          const res = await run(COMMIT_ONE_SCRIPT, [stage!, rel, name], rel)
          if (res.exitCode === 6) {
            const into = Buffer.from(res.stdout).toString('utf8') === 'files'
            throw new FilePathError('is_directory', into ? `${rel}/${name}` : rel)
          }
          stage = null
          return Buffer.from(res.stdout).toString('utf8')
        },
        async discard() {
          if (stage === null) return
          const at = stage
          stage = null
          await sh(id, root, 'rm -rf "$1"', [at])
        },
      }

      /** Stream one file into `path` in the container; resolves its size. */
      async function writeStaged(path: string, body: AsyncIterable<Uint8Array>): Promise<number> {
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
        const res = await sh(id, root, 'exec cat > "$1"', [path], { stdin: counted })
        if (failure) throw failure
        if (res.exitCode !== 0 || !complete) {
          throw new ContainerError(
            'engine_error',
            `Writing an uploaded file in the container failed (exit code ${res.exitCode ?? 'unknown'})`,
            {
              stderr_tail: res.stderr.slice(-500),
            },
          )
        }
        return size
      }
    },
  }
}

/**
 * A real path the container printed as the container's own path under `root`: the local
 * runtime's `realpath` answers with host paths, which it would not map back.
 */
function inContainer(root: string, realRoot: string, real: string): string {
  return root.replace(/\/+$/, '') + real.slice(realRoot.length) || '/'
}

/** A script's exit code as an error: a path problem, or the container's failure. */
function fail(res: { exitCode: number | null; stderr: string }, rel: string): never {
  const problem = res.exitCode === null ? undefined : PROBLEMS[res.exitCode]
  if (problem) throw new FilePathError(problem, rel)
  throw new ContainerError(
    'engine_error',
    `Working with the files in the container failed (exit code ${res.exitCode ?? 'unknown'})`,
    {
      stderr_tail: res.stderr.slice(-500),
    },
  )
}

/** A command's output up to `max` bytes (killed beyond), its stderr's tail and exit code. */
async function collect(proc: ExecProcess, max: number): Promise<Run> {
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
  return { exitCode, stdout: Buffer.concat(out), stderr, over }
}

/** The listing script's output → entries sorted by name, at most `max`. */
function parseListing(out: string, max: number): DirectoryListing {
  const end = out.indexOf('\0\0')
  const names =
    end < 0
      ? []
      : out
          .slice(0, end)
          .split('\0')
          .map((n) => n.slice(2))
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
  return { entries: entries.slice(0, max), truncated: entries.length > max }
}
