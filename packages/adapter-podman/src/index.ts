/**
 * `@berth/adapter-podman`: Berth's container runtime on Podman's Docker-compatible API.
 * The factory, its options, and the socket discovery that finds the engine.
 */

// Factory and options
export { podmanRuntime, type PodmanRuntimeOptions } from './podman-runtime.js'
export { discoverPodman, type DiscoveryEnv, type PodmanEndpoint } from './discovery.js'
