/**
 * `@berth/adapter-docker`: Berth's container runtime on the Docker Engine API. The factory
 * and its options, the engine connection it takes, and the pieces a sibling Docker-API
 * engine (`@berth/adapter-podman`) is built from; the rest stays inside the package.
 */

// Factory and options
export { dockerRuntime, type DockerRuntimeOptions } from './docker-runtime.js'
export { connectEngine, type EngineConnectionOptions } from './connection.js'
export { engineUrlOptions, type EngineUrlEnv } from './engine-url.js'

// Images built from this host's Node (a pool or environment image recipe)
export { hostImageRecipe } from './host-image.js'

// Building blocks for other Docker-API engines
export { createEngineRuntime, type EngineRuntimeOptions } from './engine-runtime.js'
export { toCreateOptions, type HardeningOptions } from './hardening.js'
/** Kept for compatibility: the disks are `@berth/core`'s now, shared with the local runtime. */
export type { DiskOptions } from '@berth/core'
