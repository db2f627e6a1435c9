/** resources/: the owner-scoped things a caller configures — users and caller keys, model API keys, profiles, catalog (tools, skills, agents, secrets), memory, environments. */
export { UsersService, hashKey, CALLER_KEY_PREFIX, OPERATOR_ID, type UsersOptions } from './users.js'
export { ApiKeysService, type ApiKeyRecord, type ResolvedCredential, type UrlCheck } from './api-keys.js'
export { ProfilesService, type ProfileRecord } from './profiles.js'
export { MemoryService, type MemoryRecord } from './memory.js'
export {
  createAgentsService,
  createSecretsService,
  createSkillsService,
  createToolsService,
  type AgentRecord,
  type AgentsService,
  type SecretRecord,
  type SecretsService,
  type SkillRecord,
  type SkillsService,
  type ToolRecord,
  type ToolsService,
} from './catalog.js'
export {
  sealServer,
  sealServers,
  maskServer,
  maskServers,
  openServer,
  openServers,
  serverSecrets,
  mcpHeaderPlaceholder,
  brokerMcpHeaders,
  type BrokeredMcpHeader,
} from './mcp-secrets.js'
export {
  EnvironmentsService,
  type EnvironmentRecord,
  type EnvironmentImages,
  type ResolvedEnvironment,
} from './environments.js'
export { DEFAULT_ENVIRONMENT_CAPS, diskLimits, type EnvironmentCaps } from './environment-caps.js'
