/**
 * `@berth/adapter-local`: Berth's container runtime without an engine: each "container"
 * is a directory and a process group on this host, sandboxed by bubblewrap where it works.
 */

// Factory and options
export { localRuntime, type LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
export type { SandboxMode } from './sandbox.js'
