import { createRequire } from 'node:module'

/** The server package's version, reported by `GET /health`. */
export const VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version
