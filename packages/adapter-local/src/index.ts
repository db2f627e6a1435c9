export { localRuntime, type LocalRuntimeOptions } from './local-runtime.js'
export { hostPath, rootDir, containerDir, readMeta, type LocalMeta } from './paths.js'
export { packPath, extractInto } from './archive.js'
