import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { inject } from 'vitest'
import { RUN_LABEL } from './vitest.leftovers.js'

/**
 * Setup file of every project that creates containers: every container and volume made
 * through dockerode in this worker (both engine adapters use it) gets the run's label, so
 * vitest.leftovers.ts can account for them at the end. Test instrumentation only: the
 * adapters themselves are unchanged.
 */
const require = createRequire(fileURLToPath(new URL('./packages/adapter-docker/package.json', import.meta.url)))
/** The part of dockerode's create options that carries labels. */
interface Labelled {
  Labels?: Record<string, string>
  HostConfig?: { Mounts?: { Type?: string; VolumeOptions?: { Labels?: Record<string, string> } }[] }
}
type Create = (this: unknown, opts?: Labelled, ...rest: unknown[]) => unknown
const proto = (require('dockerode') as { prototype: { createContainer: Create; createVolume: Create } }).prototype
const state = globalThis as { __berthRunLabel?: string }
state.__berthRunLabel = inject('berthTestRunId')

const PATCHED = Symbol.for('berth.test.run-label')
if (!(proto as Record<symbol, unknown>)[PATCHED]) {
  ;(proto as Record<symbol, unknown>)[PATCHED] = true
  const label = () => ({ [RUN_LABEL]: state.__berthRunLabel ?? 'unknown' })
  const createContainer = proto.createContainer
  proto.createContainer = function (opts, ...rest) {
    // Named volumes a mount creates on first use get the label too.
    const Mounts = opts?.HostConfig?.Mounts?.map((m) =>
      m.Type === 'volume'
        ? { ...m, VolumeOptions: { ...m.VolumeOptions, Labels: { ...m.VolumeOptions?.Labels, ...label() } } }
        : m,
    )
    const HostConfig = opts?.HostConfig && { ...opts.HostConfig, ...(Mounts && { Mounts }) }
    return createContainer.call(
      this,
      { ...opts, Labels: { ...opts?.Labels, ...label() }, ...(HostConfig && { HostConfig }) },
      ...rest,
    )
  }
  const createVolume = proto.createVolume
  proto.createVolume = function (opts, ...rest) {
    return createVolume.call(this, { ...opts, Labels: { ...opts?.Labels, ...label() } }, ...rest)
  }
}
