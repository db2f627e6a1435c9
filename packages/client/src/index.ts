// The browser-safe entry: no Node-only import here or below (checked by test/bundle.test.ts).

// The client: route methods, run, stream, sessions, files
export {
  createBerthClient,
  type BerthClient,
  type BerthClientOptions,
  type FileHelpers,
  type SessionHelpers,
  type TaskHelpers,
} from './client.js'
export type { ListItem, ListRouteName, Paginate } from './paginate.js'
export type { RunOptions, RunTaskBody } from './tasks/run.js'
export type {
  Decision,
  DecisionOptions,
  PermissionRequest,
  SteerHelpers,
  TaskControls,
} from './tasks/steer.js'
export type { Approval } from '@berth/contract'
// Playbooks and their schedules (`client.playbooks.*`)
export type { Playbook, PlaybookRun, PlaybookSchedule, PlaybookScheduleInput } from '@berth/contract'
export type { SendOptions, Session, SessionOptions } from './sessions.js'
// A session's workspace, its living agent and its checkpoints (`session.agent()`, `session.checkpoints()`)
export type { BackgroundTask, Checkpoint, LivingAgent, Workspace } from '@berth/contract'
export type { FileListing, UploadData, UploadFile, UploadOptions, UploadResult } from './files.js'

// Task events, and following them
export {
  isFinished,
  type StreamOptions,
  type Task,
  type TaskEvent,
  type TaskEventOf,
  type TaskStatus,
  type TaskStream,
} from './tasks/follow.js'

// The WebSocket client
export {
  createBerthSocket,
  type BerthSocket,
  type BerthSocketOptions,
  type SocketState,
  type SubmitTaskInput,
  type SubmittedOverSocket,
  type TaskMessage,
} from './socket.js'
export type { ConnectSocket, WebSocketLike } from './socket-connect.js'
// The messages of `/v1/ws`, as the contract declares them
export type {
  ClientMessage as SocketClientMessage,
  ServerMessage as SocketServerMessage,
  TaskEventMessage,
  TaskStatusMessage,
} from '@berth/contract'

// Errors and retries
export { BerthError, isBerthError, type BerthErrorCode, type BerthErrorInit, type ClientErrorCode } from './errors.js'
export { DEFAULT_RETRY, IDEMPOTENT_METHODS, RETRY_STATUSES } from './retry.js'

// Types of the route table
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
