import { createHash, randomBytes } from 'node:crypto'
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { bundleRunner, platformPackage, type BundleOptions, type RunnerBundle } from './bundle.js'
import { PROGRAM_FILE } from './program.js'

const SDK = '@anthropic-ai/claude-agent-sdk'

/** Options of {@link sharedRunnerBundle}. */
export interface SharedBundleOptions extends BundleOptions {
  /**
   * Where bundles are kept, one directory per content hash. Default: `BERTH_CACHE_DIR`,
   * else `$XDG_CACHE_HOME/berth`, else `~/.cache/berth`, then `runner/`.
   */
  cacheDir?: string
}

/**
 * The runner cache directory of this machine's user (see {@link SharedBundleOptions.cacheDir}).
 *
 * @example
 * ```ts
 * runnerCacheDir({ XDG_CACHE_HOME: '/var/cache' }) // '/var/cache/berth/runner'
 * ```
 */
export function runnerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BERTH_CACHE_DIR) return resolve(env.BERTH_CACHE_DIR, 'runner')
  return resolve(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'berth', 'runner')
}

/** The hash naming a bundle: the runner's code (loader and program) and the exact SDK and native packages it ships. */
function bundleKey(entry: string, platformPackages: string[]): string {
  const require = createRequire(import.meta.url)
  const sdkManifest = join(dirname(require.resolve(SDK)), 'package.json')
  const sdkRequire = createRequire(sdkManifest)
  const hash = createHash('sha256')
    .update(readFileSync(entry))
    .update(readFileSync(join(dirname(entry), PROGRAM_FILE)))
    .update(readFileSync(sdkManifest))
  for (const pkg of platformPackages) {
    let manifest: Buffer | string
    try {
      manifest = readFileSync(sdkRequire.resolve(`${pkg}/package.json`))
    } catch {
      manifest = `${pkg}: missing` // bundleRunner names the problem
    }
    hash.update(pkg).update(manifest)
  }
  return hash.digest('hex').slice(0, 16)
}

/**
 * Hard-link the native binaries an earlier bundle already holds (same package, same size,
 * copied after the source) into a bundle being built, so a new runner build does not copy
 * the ~200 MB binary again; bundleRunner then sees them current and skips them.
 */
function seedFromSiblings(root: string, tmp: string, platformPackages: string[]): void {
  const sdkRequire = createRequire(join(dirname(createRequire(import.meta.url).resolve(SDK)), 'package.json'))
  const siblings = readdirSync(root).filter((d) => !d.includes('.tmp-'))
  for (const pkg of platformPackages) {
    let srcDir: string
    try {
      srcDir = dirname(sdkRequire.resolve(`${pkg}/package.json`))
    } catch {
      continue
    }
    for (const file of ['claude', 'claude.exe']) {
      const src = join(srcDir, file)
      if (!existsSync(src)) continue
      const { size, mtimeMs } = statSync(src)
      for (const sibling of siblings) {
        const candidate = join(root, sibling, 'node_modules', pkg, file)
        const st = existsSync(candidate) ? statSync(candidate) : null
        if (!st || st.size !== size || st.mtimeMs < mtimeMs) continue
        mkdirSync(join(tmp, 'node_modules', pkg), { recursive: true })
        linkSync(candidate, join(tmp, 'node_modules', pkg, file))
        break
      }
    }
  }
}

/**
 * The runner bundle for this install and version, shared by every data dir and every server
 * on the machine: content-addressed under the cache directory (`<cacheDir>/<hash>`), built
 * once into a temporary directory and renamed into place, so concurrent starts never see a
 * half-written bundle and never build the same one twice over each other's files.
 *
 * @example
 * ```ts
 * const { dir } = sharedRunnerBundle()
 * createBerth({ runner: { bundleDir: dir }, ... })
 * ```
 */
export function sharedRunnerBundle(opts: SharedBundleOptions = {}): RunnerBundle {
  const entry = opts.entry ?? fileURLToPath(new URL('../dist/main.js', import.meta.url))
  if (!existsSync(entry))
    throw new Error(`${entry} is missing: build @berth/runner first (pnpm --filter @berth/runner build)`)
  const platformPackages = opts.platformPackages ?? [platformPackage()]
  const root = opts.cacheDir ? resolve(opts.cacheDir) : runnerCacheDir()
  const dir = join(root, bundleKey(entry, platformPackages))
  const manifest = join(dir, 'package.json')
  if (!existsSync(manifest)) {
    mkdirSync(root, { recursive: true })
    const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`
    try {
      seedFromSiblings(root, tmp, platformPackages)
      bundleRunner(tmp, { entry, platformPackages })
      renameSync(tmp, dir)
    } catch (err) {
      // Another process renamed the same bundle into place first: use it.
      if (!existsSync(manifest)) throw err
    } finally {
      rmSync(tmp, { recursive: true, force: true })
    }
  }
  const { sdkVersion } = JSON.parse(readFileSync(manifest, 'utf8')) as { sdkVersion: string }
  return { dir, main: join(dir, 'main.js'), sdkVersion }
}
