/**
 * The runtime conformance suite, by concern: one file per group of cases, all sharing one
 * {@link Suite} (a runtime, a running container, this run's labels).
 */
import { randomBytes } from 'node:crypto'
import { IDLE_COMMAND, collectExec, type ContainerRuntime } from '@berth/core'
import { afterAll, beforeAll, describe } from 'vitest'
import { archiveCases } from './archives.js'
import { execCases } from './exec.js'
import { failureCases } from './failures.js'
import { fileCases } from './files.js'
import { imageCases } from './images.js'
import { isolationCases } from './isolation.js'
import { lifecycleCases } from './lifecycle.js'
import type { ConformanceOptions, Suite } from './suite.js'
import { volumeCases } from './volumes.js'

/**
 * The runtime conformance suite: the same cases against every {@link ContainerRuntime}
 * adapter, like unstorage's driver suite. Call it from an adapter package's test file;
 * it registers a vitest `describe` block with real containers (created under a unique
 * `berth.test.run` label and removed afterwards).
 *
 * Covered: the declared capabilities; labelled volumes; create/start/inspect; exec with streamed stdout+stderr, exit codes 0 and
 * non-zero, callbacks, stdin (string, web stream, async iterable, binary); env and working
 * directory; put/get archive round trip with binary content and nested paths; missing
 * paths; list by label; limits (inspect and the cgroup, where the runtime enforces them);
 * stats; stop; idempotent remove; abort via AbortSignal; engine down → CONTAINER_FAILED;
 * a container killed from outside mid-exec → CONTAINER_FAILED, promptly.
 *
 * @example
 * ```ts
 * runtimeConformanceSuite('docker', () => dockerRuntime({ socketPath }), {
 *   image: 'berth-test:latest',
 *   capabilities: { isolation: true, limits: true },
 *   makeUnreachable: () => dockerRuntime({ socketPath: '/nonexistent.sock' }),
 *   killFromOutside: (id) => new Docker({ socketPath }).getContainer(id).kill(),
 * })
 * ```
 */
export function runtimeConformanceSuite(
  name: string,
  makeRuntime: () => ContainerRuntime | Promise<ContainerRuntime>,
  opts: ConformanceOptions,
): void {
  describe(`ContainerRuntime conformance: ${name}`, () => {
    const run = randomBytes(4).toString('hex')
    const runLabels = { 'berth.test.run': run }
    const s: Suite = {
      name,
      opts,
      run,
      runLabels,
      rt: undefined as unknown as ContainerRuntime,
      shared: '',
      builtImages: [],
      async make(spec = {}, start = true) {
        const { id } = await s.rt.create({
          image: opts.image,
          cmd: [...IDLE_COMMAND],
          workingDir: '/workspace',
          ...(opts.isolation && { isolation: opts.isolation }),
          ...spec,
          labels: { ...runLabels, ...spec.labels },
        })
        if (start) await s.rt.start(id)
        return id
      },
      sh: async (id, script, extra = {}) => collectExec(await s.rt.exec(id, { cmd: ['sh', '-c', script], ...extra })),
    }

    beforeAll(async () => {
      s.rt = await makeRuntime()
      await s.rt.ping()
      s.shared = await s.make({ env: { BERTH_SUITE: name } })
    })

    afterAll(async () => {
      if (!s.rt) return
      const mine = await s.rt.list({ labels: runLabels }).catch(() => [])
      await Promise.all(mine.map((c) => s.rt.remove(c.id)))
      for (const ref of s.builtImages) await opts.images?.removeImage(ref).catch(() => {})
      await s.rt.close?.()
    })

    lifecycleCases(s)
    volumeCases(s)
    execCases(s)
    archiveCases(s)
    fileCases(s)
    isolationCases(s)
    imageCases(s)
    failureCases(s)
  })
}
