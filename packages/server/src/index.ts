export { createBerth, type Berth, type BerthOptions } from './berth.js'
export { unstorageStore } from './store.js'
export { loadEncryptionKey } from './encryption-key.js'
export { configFromEnv, type BerthConfig } from './config.js'
