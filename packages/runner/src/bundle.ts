import { constants, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const SDK = '@anthropic-ai/claude-agent-sdk'

/** Where Berth mounts the runner bundle (read-only) inside task containers. */
export const RUNNER_MOUNT = '/opt/berth-runner'

/**
 * The command the server execs in a container whose bundle is mounted at `mount`;
 * the RunnerInput goes to its stdin.
 *
 * @example
 * ```ts
 * await rt.exec(id, { cmd: runnerCommand(), stdin: JSON.stringify(input) })
 * // ['node', '/opt/berth-runner/main.js']
 * ```
 */
export function runnerCommand(mount: string = RUNNER_MOUNT): string[] {
  return ['node', `${mount}/main.js`]
}

/**
 * The SDK's native-binary package for a platform (default: this machine).
 *
 * @example
 * ```ts
 * platformPackage('linux', 'arm64', true) // '@anthropic-ai/claude-agent-sdk-linux-arm64-musl'
 * ```
 */
export function platformPackage(platform: string = process.platform, arch: string = process.arch, musl: boolean = isMusl()): string {
  return `${SDK}-${platform}-${arch}${platform === 'linux' && musl ? '-musl' : ''}`
}

function isMusl(): boolean {
  if (process.platform !== 'linux') return false
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
  return !header?.glibcVersionRuntime
}

/** Options of {@link bundleRunner}. */
export interface BundleOptions {
  /** Native-binary packages to include (default: this machine's, see {@link platformPackage}). Each must be installed. */
  platformPackages?: string[]
  /** The built runner (default: this package's `dist/main.js`; build with `pnpm --filter @berth/runner build`). */
  entry?: string
}

/** What {@link bundleRunner} produced. */
export interface RunnerBundle {
  dir: string
  /** `<dir>/main.js`. */
  main: string
  sdkVersion: string
}

function copyIfChanged(from: string, to: string): void {
  if (existsSync(to)) {
    const a = statSync(from)
    const b = statSync(to)
    if (a.size === b.size && b.mtimeMs >= a.mtimeMs) return
  }
  mkdirSync(dirname(to), { recursive: true })
  copyFileSync(from, to, constants.COPYFILE_FICLONE)
}

/**
 * Build the self-contained runner directory a container mounts read-only: `main.js` (the
 * runner with its dependencies bundled, the SDK excepted), `package.json`, and
 * `node_modules/` with the Claude Agent SDK and its native binary package. Needs only
 * `node` to run: `node <dir>/main.js`. Re-running it refreshes the directory; the large
 * native binary is only copied when it changed.
 *
 * @example
 * ```ts
 * const { dir } = bundleRunner('/var/lib/berth/runner')
 * // mount dir at /opt/berth-runner (read-only), exec runnerCommand()
 * ```
 */
export function bundleRunner(outDir: string, opts: BundleOptions = {}): RunnerBundle {
  const dir = resolve(outDir)
  const entry = opts.entry ?? fileURLToPath(new URL('../dist/main.js', import.meta.url))
  if (!existsSync(entry)) throw new Error(`${entry} is missing: build @berth/runner first (pnpm --filter @berth/runner build)`)
  const require = createRequire(import.meta.url)
  const sdkDir = dirname(require.resolve(SDK))
  const sdkVersion = (JSON.parse(readFileSync(join(sdkDir, 'package.json'), 'utf8')) as { version: string }).version
  const sdkRequire = createRequire(join(sdkDir, 'package.json'))

  mkdirSync(dir, { recursive: true })
  copyIfChanged(entry, join(dir, 'main.js'))
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'berth-runner-bundle', private: true, type: 'module', main: 'main.js', sdkVersion }, null, 2)}\n`,
  )
  const sdkOut = join(dir, 'node_modules', SDK)
  rmSync(sdkOut, { recursive: true, force: true })
  cpSync(sdkDir, sdkOut, { recursive: true, dereference: true, filter: (src) => !src.startsWith(join(sdkDir, 'node_modules')) })
  for (const pkg of opts.platformPackages ?? [platformPackage()]) {
    let pkgDir: string
    try {
      pkgDir = dirname(sdkRequire.resolve(`${pkg}/package.json`))
    } catch {
      throw new Error(`${pkg} is not installed next to ${SDK}; install it (npm i ${pkg}@${sdkVersion} --force) or choose other platformPackages`)
    }
    for (const file of ['package.json', 'README.md', 'LICENSE.md', 'claude', 'claude.exe']) {
      if (existsSync(join(pkgDir, file))) copyIfChanged(join(pkgDir, file), join(dir, 'node_modules', pkg, file))
    }
  }
  return { dir, main: join(dir, 'main.js'), sdkVersion }
}
