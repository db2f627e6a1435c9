import { constants, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { platformPackage, SDK } from './platform.js'
import { PROGRAM_FILE, writeCodeCache } from './program.js'

export { platformPackage }

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

/** Options of {@link bundleRunner}. */
export interface BundleOptions {
  /** Native-binary packages to include (default: this machine's, see {@link platformPackage}). Each must be installed. */
  platformPackages?: string[]
  /**
   * The built runner's loader (default: this package's `dist/main.js`; build with
   * `pnpm --filter @berth/runner build`); the program, `runner.cjs`, is taken from beside it.
   */
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
 * loader), `runner.cjs` (the runner with its dependencies bundled, the Claude Agent SDK
 * included) and its V8 code cache `runner.cjs.cache` (made by this Node: a container running
 * the same Node build skips compiling the program, any other compiles it as usual),
 * `package.json`, and `node_modules/` with Claude Code's native binary package. Needs only
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
  const program = join(dirname(entry), PROGRAM_FILE)
  for (const file of [entry, program]) {
    if (!existsSync(file))
      throw new Error(`${file} is missing: build @berth/runner first (pnpm --filter @berth/runner build)`)
  }
  const require = createRequire(import.meta.url)
  const sdkDir = dirname(require.resolve(SDK))
  const sdkVersion = (JSON.parse(readFileSync(join(sdkDir, 'package.json'), 'utf8')) as { version: string }).version
  const sdkRequire = createRequire(join(sdkDir, 'package.json'))

  mkdirSync(dir, { recursive: true })
  copyIfChanged(entry, join(dir, 'main.js'))
  copyIfChanged(program, join(dir, PROGRAM_FILE))
  writeCodeCache(dir)
  writeFileSync(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: 'berth-runner-bundle', private: true, type: 'module', main: 'main.js', sdkVersion }, null, 2)}\n`,
  )
  // The SDK itself is inlined in runner.cjs; only its native binary package is needed.
  rmSync(join(dir, 'node_modules', SDK), { recursive: true, force: true })
  for (const pkg of opts.platformPackages ?? [platformPackage()]) {
    let pkgDir: string
    try {
      pkgDir = dirname(sdkRequire.resolve(`${pkg}/package.json`))
    } catch {
      throw new Error(
        `${pkg} is not installed next to ${SDK}; install it (npm i ${pkg}@${sdkVersion} --force) or choose other platformPackages`,
      )
    }
    for (const file of ['package.json', 'README.md', 'LICENSE.md', 'claude', 'claude.exe']) {
      if (existsSync(join(pkgDir, file))) copyIfChanged(join(pkgDir, file), join(dir, 'node_modules', pkg, file))
    }
  }
  return { dir, main: join(dir, 'main.js'), sdkVersion }
}
