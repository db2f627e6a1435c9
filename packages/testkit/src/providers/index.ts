/**
 * `@berth/testkit/providers`: local fakes of third-party providers, speaking their real
 * protocols over real sockets. No vitest here, so apps can use them in any test runner.
 *
 * - {@link startFakeGitProvider}: a GitHub-, GitLab- or Bitbucket-shaped OAuth 2 server and user API.
 * - {@link startFakeGitServer}: a Git host over HTTPS (`git http-backend`) taking Basic credentials.
 * - {@link selfSignedCert}: a throwaway TLS certificate for it.
 * - {@link startFakeMcpServer}: a remote MCP server (streamable HTTP over HTTPS) that requires a bearer token.
 * - {@link startFakeBankProvider}: a Teller-shaped banking-data API and its connect widget's payloads.
 * - {@link startFakeMessenger}: a Telegram-shaped Bot API that delivers updates to the registered webhook.
 * - {@link startFakeChatProvider}: a Slack-like chat workspace (OAuth with token rotation, `chat.postMessage`, signed events).
 * - {@link startFakeMailProvider}: a Gmail-like mail provider (Google OAuth, userinfo, `messages.send`).
 * - {@link startFakeBedrock}: Amazon Bedrock's runtime for Claude (SigV4 checked, event-stream answers).
 * - {@link startFakeVertex}: Vertex AI's Claude endpoints and Google's token endpoint (JWT-bearer grant checked).
 */
export { startFakeGitProvider } from './oauth-provider.js'
export type {
  FakeGitProvider,
  FakeGitProviderOptions,
  FakeGitProviderConfig,
  FakeProviderRequest,
} from './oauth-provider-types.js'
export {
  PROVIDER_SHAPES,
  type FakeGitProviderKind,
  type FakeGitUser,
  type ProviderShape,
  type TokenErrorKind,
  type WireAnswer,
} from './git-provider-shapes.js'
export { startFakeGitServer, type FakeGitServer, type FakeGitServerOptions, type FakeGitRequest } from './git-server.js'
export { selfSignedCert, type SelfSignedCert } from './tls.js'
export {
  startFakeMcpServer,
  type FakeMcpServer,
  type FakeMcpServerOptions,
  type FakeMcpRequest,
  type FakeMcpTool,
} from './mcp-server.js'
export { startFakeChatProvider, chatSignature } from './chat-provider.js'
export type {
  FakeChatProvider,
  FakeChatProviderOptions,
  FakeChatProviderConfig,
  FakeChatRequest,
  FakeChatMessage,
  FakeChatTeam,
  FakeChatChannel,
  SendChatEventOptions,
} from './chat-provider-types.js'
export {
  startFakeMailProvider,
  type FakeMailProvider,
  type FakeMailProviderOptions,
  type FakeMailProviderConfig,
  type FakeMailRequest,
  type FakeSentMail,
  type FakeMailUser,
} from './mail-provider.js'
export {
  startFakeBankProvider,
  type FakeBankProvider,
  type FakeBankProviderOptions,
  type FakeEnrollment,
  type FakeBankRequest,
  type FakeBankFailure,
} from './bank-provider.js'
export { startFakeMessenger } from './messenger-provider.js'
export type {
  FakeMessenger,
  FakeMessengerOptions,
  FakeBot,
  FakeChat,
  FakeMessage,
  FakeSentMessage,
  FakeWebhook,
  FakeMessengerRequest,
  FakeMessengerFailure,
  FakeDelivery,
} from './messenger-provider-types.js'
export {
  startFakeBedrock,
  type FakeBedrock,
  type FakeBedrockOptions,
  type FakeBedrockRequest,
  type FakeAwsCredentials,
} from './bedrock-provider.js'
export {
  startFakeVertex,
  type FakeVertex,
  type FakeVertexOptions,
  type FakeVertexRequest,
  type FakeServiceAccount,
} from './vertex-provider.js'
