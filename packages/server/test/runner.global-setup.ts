import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { findRepoRoot } from '@berth/testkit'

/** Where the server's task tests find the runner bundle (their own copy: suites run in parallel). */
export const RUNNER_BUNDLE = join(findRepoRoot(), '.tmp', 'runner-bundle-server')

/**
 * Task tests run the real runner in real containers: build `@berth/runner` when its output
 * is missing, then write the self-contained bundle containers mount read-only.
 */
export default async function setup(): Promise<void> {
  const root = findRepoRoot()
  if (!existsSync(join(root, 'packages/runner/dist/main.js'))) {
    const build = spawnSync('pnpm', ['--filter', '@berth/runner', 'run', 'build'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    })
    if (build.status !== 0) throw new Error('building @berth/runner failed')
  }
  const { bundleRunner } = await import('@berth/runner')
  bundleRunner(RUNNER_BUNDLE)
}
