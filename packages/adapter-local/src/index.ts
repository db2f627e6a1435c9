export { localRuntime, type LocalRuntime, type LocalRuntimeOptions } from './local-runtime.js'
export { hostPath, rootDir, containerDir, readMeta, type LocalMeta } from './paths.js'
export { packPath, extractInto } from './archive.js'
export { detectSandbox, bwrapArgs, type Sandbox, type SandboxMode } from './sandbox.js'
