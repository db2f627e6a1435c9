import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { ENSURE_SCRIPT, findRepoRoot } from '@berth/testkit'

/** Install bubblewrap the way engines are provisioned, so the bwrap suites run (never skip). */
export default function setup(): void {
  const root = findRepoRoot()
  const run = spawnSync('bash', [join(root, ENSURE_SCRIPT)], {
    cwd: root,
    env: { ...process.env, BERTH_ENGINES: 'local' },
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: 10 * 60_000,
  })
  if (run.status !== 0)
    throw new Error(`${ENSURE_SCRIPT} failed (exit ${run.status ?? run.signal}) while ensuring bwrap`)
}
