import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/** A container engine the provisioning script made ready, as written to `.tmp/engines/<name>.json`. */
export interface EngineInfo {
  engine: 'docker' | 'podman'
  /** The Engine API unix socket. */
  socketPath: string
  /** The local test image (node + busybox, no registry): `berth-test:latest` / `localhost/berth-test:latest`. */
  image: string
  version: string
}

/** Where the provisioning script is, relative to the repository root. */
export const ENSURE_SCRIPT = 'scripts/engines/ensure.sh'

/**
 * The repository root: the nearest directory at or above `from` holding the provisioning
 * script (`BERTH_REPO_ROOT` wins when set).
 *
 * @example
 * ```ts
 * const root = findRepoRoot() // '/work/main'
 * ```
 */
export function findRepoRoot(from: string = process.cwd()): string {
  if (process.env.BERTH_REPO_ROOT) return process.env.BERTH_REPO_ROOT
  let dir = resolve(from)
  for (;;) {
    if (existsSync(join(dir, ENSURE_SCRIPT))) return dir
    const up = dirname(dir)
    if (up === dir) throw new Error(`no ${ENSURE_SCRIPT} found at or above ${from}; set BERTH_REPO_ROOT`)
    dir = up
  }
}

function enginesDir(root: string): string {
  return process.env.BERTH_ENGINES_DIR ?? join(root, '.tmp', 'engines')
}

/**
 * Run the provisioning script for the given engines — installing them from Debian's
 * packages when missing and root, starting them, building the test image — and return
 * what it wrote. Its progress goes to stderr. Throws (loudly, with the script's exit code)
 * when an engine cannot be made to run: engine suites fail, they never skip.
 *
 * @example
 * ```ts
 * // test/global-setup.ts of an adapter package
 * export default () => { ensureEngines(['podman']) }
 * ```
 */
export function ensureEngines(engines: EngineInfo['engine'][], root: string = findRepoRoot()): EngineInfo[] {
  const script = join(root, ENSURE_SCRIPT)
  const run = spawnSync('bash', [script], {
    cwd: root,
    env: { ...process.env, BERTH_ENGINES: engines.join(' ') },
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: 30 * 60_000,
  })
  if (run.error) throw new Error(`${ENSURE_SCRIPT} could not run: ${run.error.message}`)
  if (run.status !== 0) {
    throw new Error(
      `${ENSURE_SCRIPT} failed (exit ${run.status ?? run.signal}) for ${engines.join(', ')}: ` +
        'the container engine suites need a running engine; see the [engines] lines above',
    )
  }
  return engines.map((e) => readEngine(e, root))
}

/**
 * The provisioning result for one engine. Throws when the script has not run for it.
 *
 * @example
 * ```ts
 * const { socketPath, image } = readEngine('docker')
 * ```
 */
export function readEngine(engine: EngineInfo['engine'], root: string = findRepoRoot()): EngineInfo {
  const file = join(enginesDir(root), `${engine}.json`)
  if (!existsSync(file)) {
    throw new Error(`${engine} is not provisioned (${file} missing): run bash ${ENSURE_SCRIPT}`)
  }
  return JSON.parse(readFileSync(file, 'utf8')) as EngineInfo
}
