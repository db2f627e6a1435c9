/**
 * Archives of a sandboxed local container, read and written by `tar` inside a sandbox of
 * the container (its mounts, its user): every path, and every symlink on the way, resolves
 * in the container's own view, never on the host. A symlink the agent swaps in during a
 * download can only point at what the agent could read anyway.
 */
import { spawn } from 'node:child_process'
import { posix } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { toWebStream } from '@berth/core'
import type { LocalContext } from './local-context.js'
import { launch } from './local-launch.js'
import type { LocalMeta } from './paths.js'
import { killTree } from './processes.js'

/** The exit status the scripts below use for "no such path" (tar itself exits 0, 1 or 2). */
const MISSING = 44

/** Create: a missing path is {@link MISSING}; a directory's entries come back sorted, named `dir/...`. */
const CREATE =
  'cd -- "$1" 2>/dev/null || exit 44; [ -e "$2" ] || [ -L "$2" ] || exit 44; ' +
  'exec tar --create --file=- --sort=name --numeric-owner -- "$2"'
/** Extract into an existing directory; the files become the extracting user's, modes kept. */
const EXTRACT =
  '[ -d "$1" ] || exit 44; cd -- "$1" || exit 44; ' +
  'exec tar --extract --file=- --no-same-owner --preserve-permissions --no-overwrite-dir'

function start(ctx: LocalContext, meta: LocalMeta, script: string, args: string[], stdin: boolean) {
  const how = launch(ctx, meta, ['/bin/sh', '-c', script, 'sh', ...args], '/')
  const child = spawn(how.file, how.args, {
    cwd: how.cwd,
    env: how.env,
    detached: true, // own process group, killed as a whole
    stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-2000)
  })
  const exit = new Promise<number>((resolve) => {
    child.once('error', () => resolve(127))
    child.once('close', (code) => resolve(code ?? 128))
  })
  return { child, exit, stderr: () => stderr.trim().split('\n').slice(-3).join('; ') }
}

/**
 * A tar of `path` in the container, as the Docker archive endpoint names it (the base name
 * on top, directories ending in `/`), made inside the container's sandbox as its user.
 * Rejects with `not_found` when the path does not exist there.
 *
 * @example
 * ```ts
 * const tar = await sandboxedGetArchive(ctx, meta, '/workspace/out')
 * ```
 */
export async function sandboxedGetArchive(
  ctx: LocalContext,
  meta: LocalMeta,
  path: string,
): Promise<ReadableStream<Uint8Array>> {
  const abs = posix.normalize(`/${path}`).replace(/(.)\/$/, '$1')
  const base = posix.basename(abs) || '.'
  const run = start(ctx, meta, CREATE, [posix.dirname(abs), base], false)
  const it = run.child.stdout![Symbol.asyncIterator]() as AsyncIterator<Buffer>
  const head = await it.next()
  if (head.done) {
    const code = await run.exit
    if (code === MISSING)
      throw ctx.fail('not_found', `Could not find the file ${path} in ${meta.id}`, {
        op: 'getArchive',
        id: meta.id,
        path,
      })
    throw ctx.fail('engine_error', `reading ${path} failed: ${run.stderr()}`, { op: 'getArchive', id: meta.id, path })
  }
  async function* rest(): AsyncGenerator<Uint8Array> {
    yield head.value
    for (let next = await it.next(); !next.done; next = await it.next()) yield next.value
    // 1 is tar's "some file changed as we read it": the archive is still whole.
    const code = await run.exit
    if (code > 1)
      throw ctx.fail('engine_error', `reading ${path} failed: ${run.stderr()}`, { op: 'getArchive', id: meta.id, path })
  }
  return toWebStream(rest(), () => {
    if (run.child.pid) killTree(run.child.pid)
  })
}

/**
 * Extract a tar into the directory `path` of the container, inside its sandbox as its
 * user: `not_found` when there is no such directory, `engine_error` when tar refuses an
 * entry (a name climbing out with `..`, say).
 *
 * @example
 * ```ts
 * await sandboxedPutArchive(ctx, meta, '/workspace', tarBytes)
 * ```
 */
export async function sandboxedPutArchive(
  ctx: LocalContext,
  meta: LocalMeta,
  path: string,
  tar: AsyncIterable<Uint8Array>,
): Promise<void> {
  const run = start(ctx, meta, EXTRACT, [posix.normalize(`/${path}`)], true)
  run.child.stdout!.resume()
  // tar exiting early (a missing directory) closes its stdin: its exit status says why.
  await pipeline(Readable.from(tar), run.child.stdin!).catch(() => {})
  const code = await run.exit
  if (code === MISSING)
    throw ctx.fail('not_found', `Could not find the directory ${path} in ${meta.id}`, {
      op: 'putArchive',
      id: meta.id,
      path,
    })
  if (code !== 0)
    throw ctx.fail('engine_error', `extracting into ${path} failed: ${run.stderr()}`, {
      op: 'putArchive',
      id: meta.id,
      path,
    })
}
