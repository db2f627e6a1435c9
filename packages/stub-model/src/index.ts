/**
 * `@berth/stub-model`: the offline model, a scriptable fake of the Anthropic Messages API.
 * Only `node:` imports: the runner embeds it for the `stub` provider, and
 * `@berth/testkit/model` re-exports it for tests.
 */
export {
  createOfflineModel,
  type OfflineModelOptions,
  type RecordedAnswer,
  type RecordedRequest,
  type RequestHandler,
} from './handler.js'
export { startOfflineModel, type OfflineModelServer } from './server.js'
export { answer, FILLER_TOOL, type Answer, type AnswerBlock, type MessagesRequest } from './respond.js'
export {
  parseScript,
  stripDirectives,
  DirectiveError,
  type Script,
  type ToolDirective,
  type ErrorKind,
} from './directives.js'
export { readConversation, type ConversationState, type MessageParam } from './conversation.js'
export { API_ERRORS, errorBody } from './errors.js'
export { streamEvents, encodeEvent, messageBody, type StreamEvent } from './sse.js'
