/**
 * `@berth/adapter-local`: Berth's container runtime without an engine: each "container"
 * is a directory and a process group on this host, sandboxed by bubblewrap where it works.
 */

// Factory and options
export { localRuntime, type LocalRuntime } from './local-runtime.js'
export type { LocalRuntimeOptions } from './local-context.js'
export type { SandboxMode } from './sandbox.js'
