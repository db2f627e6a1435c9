/**
 * `@berth/contract`: Berth's API as data, with no Node-only and no server code, so it runs
 * in browsers. The route declarations (method, path, auth, schemas), the schemas, the error
 * model, identifiers, the WebSocket protocol, the task statuses and the runner protocol.
 * `@berth/core` attaches the handlers; `@berth/client`, the CLI and the console import this.
 */

// Errors and ids
export {
  ApiError,
  ERROR_STATUS,
  isApiError,
  notFound,
  validationError,
  type ErrorBody,
  type ErrorCode,
  type ValidationIssue,
} from './errors.js'
export { ID_PREFIX, idPattern, newId, randomToken, type IdKind } from './ids.js'

// Routes: the declarations the server mounts, the document describes and the client calls
export {
  defineRoute,
  type AnyRoute,
  type AuthLevel,
  type HttpMethod,
  type MultipartBody,
  type RouteDef,
} from './route.js'
export { crudRoutes } from './routes/crud.js'
export { routes, type Routes } from './routes/index.js'

// Task statuses and transcript event types
export {
  ACTIVE_TASK_STATUSES,
  ENDED_TASK_STATUSES,
  TASK_STATUSES,
  TRANSCRIPT_EVENT_TYPES,
  isEndedStatus,
  type EndedTaskStatus,
} from './statuses.js'

// The WebSocket protocol of /v1/ws
export {
  ClientEnvelope,
  ClientMessage,
  ErrorMessage,
  PongMessage,
  SLOW_CONSUMER_CLOSE,
  ServerMessage,
  SubmittedMessage,
  TaskEvent,
  TaskEventMessage,
  TaskStatusMessage,
} from './socket.js'

// Schemas (valibot; each is also its output type). `documentedSchemas` are the ones the
// OpenAPI document names in `components.schemas`.
export * from './schemas/index.js'
export * as documentedSchemas from './schemas/index.js'
export * from './schemas/bank-provider.js'
export * from './schemas/chat-mail.js'
export * from './schemas/git-account.js'
export * from './schemas/length.js'
export * from './schemas/limits.js'
export * from './schemas/messenger-bot.js'
export * from './schemas/oauth-return-path.js'

// Model patterns and the price table behind every cost (the gateway's and the runner's)
export { modelAllowed } from './models.js'
export {
  costOf,
  emptyUsage,
  mergeUsage,
  MODEL_PRICES,
  priceOf,
  UNKNOWN_MODEL_PRICE,
  WEB_SEARCH_PRICE_USD,
  type ModelPrice,
  type TokenUsage,
} from './prices.js'

// Runner protocol (the runner's stdin and stdout)
export {
  RunnerAgent,
  RunnerControl,
  RunnerEvent,
  RunnerInput,
  RunnerModelUsage,
  RunnerModel,
  RunnerOutcome,
  RunnerSkill,
  ToolCall,
} from './runner-protocol.js'
export { secretForms } from './secret-forms.js'
