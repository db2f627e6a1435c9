import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { TestProject } from 'vitest/node'

/**
 * The label every container and volume a test creates carries (added by
 * vitest.leftovers.setup.ts), valued with this run's id: parallel runs from other checkouts
 * on the same machine carry other ids and are never counted here.
 */
export const RUN_LABEL = 'berth.test.run-id'

declare module 'vitest' {
  export interface ProvidedContext {
    berthTestRunId: string
  }
}

const root = fileURLToPath(new URL('./', import.meta.url))

/** The engines the suites use: sockets from .tmp/engines/*.json (scripts/engines/ensure.sh). */
function engineSockets(): { engine: string; socketPath: string }[] {
  const out: { engine: string; socketPath: string }[] = []
  for (const engine of ['docker', 'podman']) {
    const file = `${root}.tmp/engines/${engine}.json`
    if (!existsSync(file)) continue
    const { socketPath } = JSON.parse(readFileSync(file, 'utf8')) as { socketPath: string }
    if (existsSync(socketPath)) out.push({ engine, socketPath })
  }
  return out
}

type Dockerode = new (opts: {
  socketPath: string
}) => {
  listContainers(o: unknown): Promise<{ Id: string; Names: string[]; Labels: Record<string, string> }[]>
  listVolumes(o: unknown): Promise<{ Volumes: { Name: string; Labels: Record<string, string> | null }[] | null }>
  getContainer(id: string): { remove(o: unknown): Promise<unknown> }
  getVolume(name: string): { remove(o: unknown): Promise<unknown> }
}

/**
 * Global setup of every project that creates containers: gives the run an id (provided to
 * the workers as `berthTestRunId`), and at the end fails the run when any container or
 * volume labelled with it is still on an engine, naming each (its `berth.pool` and
 * `berth.test.*` labels point at the test). The leftovers are removed, so the next run
 * starts clean.
 */
export default function setup(project: TestProject): () => Promise<void> {
  const id = `${project.name}-${process.pid}-${randomBytes(4).toString('hex')}`
  project.provide('berthTestRunId', id)
  return async () => {
    const require = createRequire(`${root}packages/adapter-docker/package.json`)
    const Docker = require('dockerode') as Dockerode
    const filters = { label: [`${RUN_LABEL}=${id}`] }
    const left: string[] = []
    for (const { engine, socketPath } of engineSockets()) {
      const docker = new Docker({ socketPath })
      for (const c of await docker.listContainers({ all: true, filters })) {
        left.push(`${engine} container ${c.Names[0] ?? c.Id} ${JSON.stringify(c.Labels)}`)
        await docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch(() => {})
      }
      for (const v of (await docker.listVolumes({ filters })).Volumes ?? []) {
        left.push(`${engine} volume ${v.Name} ${JSON.stringify(v.Labels)}`)
        await docker
          .getVolume(v.Name)
          .remove({ force: true })
          .catch(() => {})
      }
    }
    if (left.length) {
      process.exitCode = 1
      throw new Error(
        `[${project.name}] ${left.length} container(s)/volume(s) outlived the tests (now removed):\n  ${left.join('\n  ')}`,
      )
    }
  }
}
