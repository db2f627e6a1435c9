/**
 * Loads the built workspace packages the benchmarks measure. The repository root does not
 * depend on `@berth/*` or `unstorage`, so they are resolved the way `@berth/server` itself
 * resolves them (from packages/server), and their ESM builds are imported. What runs is
 * what `pnpm build` produced: the same code a deployment runs.
 *
 * `BENCH_SERVER_DIR` points at another built `@berth/server` package directory (with its
 * own node_modules), to A/B a candidate change against the workspace build.
 *
 * Call it only in a process started by {@link forkTs} (bench/lib/child.ts): under plain
 * `--import tsx` the root tsconfig's `paths` would make packages/server/dist import
 * @berth/core's sources instead of its build.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type * as ServerModule from '@berth/server'
import type * as CoreModule from '@berth/core'
import type { BerthOptions } from '@berth/server'

type Storage = NonNullable<BerthOptions['storage']>

/** The subset of unstorage the benchmarks use. */
export interface UnstorageModule {
  createStorage(opts?: Record<string, unknown>): Storage
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

interface PackageJson {
  name?: string
  module?: string
  exports?: Record<string, unknown>
}

function readPkg(dir: string): PackageJson {
  return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as PackageJson
}

/** The ESM entry of package directory `dir` (its `exports['.'].import`, else `module`). */
function esmEntry(dir: string): string {
  const pkg = readPkg(dir)
  const dot = pkg.exports?.['.'] as { import?: string | { default?: string } } | undefined
  const imp = typeof dot?.import === 'string' ? dot.import : dot?.import?.default
  const rel = imp ?? pkg.module
  if (!rel) throw new Error(`${pkg.name ?? dir} has no ESM entry`)
  return join(dir, rel)
}

/**
 * Directory of package `name` as Node would find it from `fromDir` (the node_modules
 * lookup up the tree), symlinks resolved. Independent of export conditions and of tsx's
 * tsconfig `paths`, which would otherwise send `@berth/*` to sources.
 */
function packageDir(fromDir: string, name: string): string {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate)
    if (dirname(dir) === dir) break
  }
  throw new Error(`cannot find ${name} from ${fromDir}: run pnpm install (and pnpm build)`)
}

async function importBuilt<T>(dir: string): Promise<T> {
  const entry = esmEntry(dir)
  if (!existsSync(entry)) {
    throw new Error(`${entry} is missing: build the packages first (pnpm build, or pnpm bench which builds)`)
  }
  return (await import(pathToFileURL(entry).href)) as T
}

/**
 * `@berth/server`, `@berth/core` and `unstorage`, as built in this workspace.
 *
 * @example
 * ```ts
 * const { server, core, unstorage } = await loadWorkspace()
 * const berth = server.createBerth({ storage: unstorage.createStorage(), logger: core.silentLogger })
 * ```
 */
export async function loadWorkspace(): Promise<{
  server: typeof ServerModule
  core: typeof CoreModule
  unstorage: UnstorageModule
  serverDir: string
}> {
  const serverDir = process.env.BENCH_SERVER_DIR ? resolve(process.env.BENCH_SERVER_DIR) : join(ROOT, 'packages/server')
  const [server, core, unstorage] = await Promise.all([
    importBuilt<typeof ServerModule>(serverDir),
    importBuilt<typeof CoreModule>(packageDir(serverDir, '@berth/core')),
    importBuilt<UnstorageModule>(packageDir(serverDir, 'unstorage')),
  ])
  return { server, core, unstorage, serverDir }
}

/**
 * Another built workspace package (e.g. `@berth/adapter-podman`), resolved from the
 * `@berth/server` directory in use (`BENCH_SERVER_DIR` or packages/server) the way
 * {@link loadWorkspace} resolves `@berth/core`. Same rule: only in a process started by
 * `forkTs`.
 *
 * @example
 * ```ts
 * const { podmanRuntime } = await loadBuiltPackage<typeof import('@berth/adapter-podman')>('@berth/adapter-podman')
 * ```
 */
export async function loadBuiltPackage<T>(name: string): Promise<T> {
  const serverDir = process.env.BENCH_SERVER_DIR ? resolve(process.env.BENCH_SERVER_DIR) : join(ROOT, 'packages/server')
  return importBuilt<T>(packageDir(serverDir, name))
}

/**
 * A file inside a package as the `@berth/server` in use resolves it, e.g. unstorage's
 * fs driver (`unstorage`, `drivers/fs.mjs`), to build the same storage Berth builds by
 * default and wrap it.
 *
 * @example
 * ```ts
 * const { default: fsDriver } = await loadPackageFile<{ default: (o: { base: string }) => unknown }>('unstorage', 'drivers/fs.mjs')
 * ```
 */
export async function loadPackageFile<T>(name: string, file: string): Promise<T> {
  const serverDir = process.env.BENCH_SERVER_DIR ? resolve(process.env.BENCH_SERVER_DIR) : join(ROOT, 'packages/server')
  return (await import(pathToFileURL(join(packageDir(serverDir, name), file)).href)) as T
}
