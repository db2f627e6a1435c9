export { createBerthClient, type BerthClient, type BerthClientOptions } from './client.js'
export { BerthError, isBerthError, type BerthErrorCode, type BerthErrorInit, type ClientErrorCode } from './errors.js'
export { DEFAULT_RETRY, IDEMPOTENT_METHODS, RETRY_STATUSES } from './retry.js'
export type { CamelCase, RouteTree } from './tree.js'
export type {
  CallOptions,
  InputRequired,
  RetryOptions,
  RouteArgs,
  RouteInput,
  RouteMethod,
  RouteName,
  RouteOf,
  RouteOutput,
  TableRoute,
} from './types.js'
