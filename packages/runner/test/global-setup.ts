import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { TestProject } from 'vitest/node'
import { bundleRunner } from '../src/bundle.js'
import { BUNDLE_DIR } from './helpers.js'

/**
 * Build the runner (dist/main.js) and the bundle every runner test executes, host and container
 * alike; provide one parent for the tests' workspaces and remove it after the run.
 */
export default function setup(project: TestProject): () => void {
  const pkg = fileURLToPath(new URL('..', import.meta.url))
  const build = spawnSync('pnpm', ['run', 'build'], {
    cwd: pkg,
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: 180_000,
  })
  if (build.status !== 0) throw new Error(`@berth/runner build failed (exit ${build.status ?? build.signal})`)
  const started = Date.now()
  bundleRunner(BUNDLE_DIR)
  console.error(`[runner tests] bundle ready in ${BUNDLE_DIR} (${Date.now() - started} ms)`)
  const workspaces = mkdtempSync(join(tmpdir(), 'berth-runner-ws-'))
  project.provide('runnerWorkspaces', workspaces)
  return () => rmSync(workspaces, { recursive: true, force: true })
}
