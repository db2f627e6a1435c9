/**
 * `createBerth`'s runtime option: `auto` takes the engine that answers (pinged on a worker
 * thread, so the call stays synchronous) and falls back to `local`; a named engine that
 * does not answer is refused; a chosen runtime comes with the standalone server's pool.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { silentLogger } from '@berth/core'
import { chooseRuntime, createBerth } from '@berth/server'
import { afterAll, expect, it } from 'vitest'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-runtime-choice-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
// Engines nobody listens on: what a machine without Docker or Podman looks like.
const dead = `unix://${join(dataDir, 'no-engine.sock')}`
const noEngine = { DOCKER_HOST: dead, CONTAINER_HOST: dead }

it('auto takes Docker when its socket answers', () => {
  const chosen = chooseRuntime({ dataDir, warn: () => {} })
  expect(chosen.name).toBe('docker')
  expect(chosen.description).toBe('docker (unix:///var/run/docker.sock)')
})

it('auto falls back to local, saying so, when no engine answers', () => {
  const warnings: string[] = []
  const chosen = chooseRuntime({ dataDir, env: noEngine, warn: (line) => warnings.push(line) })
  expect(chosen.name).toBe('local')
  expect(warnings[0]).toBe(
    `No container engine answers (docker at ${dead} does not answer; podman at ${dead} does not answer); falling back to BERTH_RUNTIME=local.`,
  )
})

it('a named engine that does not answer is refused', () => {
  expect(() => chooseRuntime({ runtime: 'podman', dataDir, env: noEngine })).toThrow(
    `BERTH_RUNTIME=podman, but the engine does not answer. podman at ${dead} does not answer`,
  )
})

it("a named runtime comes with pnpm start's pool and runner; false runs none", async () => {
  const local = createBerth({ dataDir, runtime: 'local', logger: silentLogger })
  await local.ready
  expect(local.services.pool.stats()).toMatchObject({ min: 0, max: 20 })
  expect(local.pool).toBeDefined()
  await local.close()
  const none = createBerth({ dataDir, runtime: false, logger: silentLogger })
  expect(none.pool).toBeUndefined()
  await none.close()
})
