import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { ensureEngines, findRepoRoot } from '@berth/testkit'

/** The console suite's own runner bundle (suites run in parallel; each writes its own). */
export const RUNNER_BUNDLE = join(findRepoRoot(), '.tmp', 'runner-bundle-console')

/**
 * The browser tests need: Chromium (scripts/browsers/ensure-chromium.sh installs Debian's
 * package when missing, the way scripts/engines/ensure.sh provisions the engines), Podman
 * and its test image, the built console and the runner bundle task containers mount.
 */
export default async function setup(): Promise<void> {
  const root = findRepoRoot()
  const chromium = spawnSync('bash', [join(root, 'scripts/browsers/ensure-chromium.sh')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
  })
  if (chromium.status !== 0) throw new Error('scripts/browsers/ensure-chromium.sh failed (see above)')
  process.env.BERTH_CHROMIUM = chromium.stdout.trim().split('\n').pop()
  ensureEngines(['podman'])
  for (const pkg of ['console', 'runner']) {
    if (existsSync(join(root, `packages/${pkg}/dist`))) continue
    const build = spawnSync('pnpm', ['--filter', `@berth/${pkg}`, 'run', 'build'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    if (build.status !== 0) throw new Error(`building @berth/${pkg} failed`)
  }
  const { bundleRunner } = await import('@berth/runner')
  bundleRunner(RUNNER_BUNDLE)
}
