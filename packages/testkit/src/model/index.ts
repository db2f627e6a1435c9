/**
 * `@berth/testkit/model`: the offline model, a scriptable fake of the Anthropic Messages
 * API. No vitest here: the runner embeds it for the `stub` provider.
 */
export { createOfflineModel, type OfflineModelOptions, type RecordedRequest, type RequestHandler } from './handler.js'
export { startOfflineModel, type OfflineModelServer } from './server.js'
export { answer, FILLER_TOOL, type Answer, type AnswerBlock, type MessagesRequest } from './respond.js'
export { parseScript, stripDirectives, DirectiveError, type Script, type ToolDirective, type ErrorKind } from './directives.js'
export { readConversation, type ConversationState, type MessageParam } from './conversation.js'
export { API_ERRORS, errorBody } from './errors.js'
export { streamEvents, encodeEvent, messageBody, type StreamEvent } from './sse.js'
