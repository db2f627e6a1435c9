/**
 * The API contract without any Node-only module: the route table, its schemas, errors and
 * ids. `@berth/client` imports this entry (`@berth/core/contract`), so it runs in browsers.
 */
export * from './errors.js'
export * from './ids.js'
export * from './route.js'
export * from './routes/index.js'
export * from './schemas/index.js'
export * from './tasks/runner-protocol.js'
export * from './tasks/secret-forms.js'
