export { memoryStore } from './memory.js'
export { sqliteStore, type ClosableStore } from './sqlite.js'
export { redisStore, type RedisStoreOptions } from './redis.js'
