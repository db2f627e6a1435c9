import { ApiError, DEFAULT_APPROVAL_TIMEOUT_S, type RunnerInput } from '@berth/contract'
import type { ApiKeysService } from '../resources/api-keys.js'
import type { AgentsService, SecretsService, SkillsService, ToolsService } from '../resources/catalog.js'
import type { GitAccountsService } from '../integrations/git-accounts.js'
import type { MemoryService } from '../resources/memory.js'
import type { ProfileRecord } from '../resources/profiles.js'
import type { WorkspaceRecord } from '../workspaces/workspaces.js'
import type { Cipher } from '../ports/cipher.js'
import type { TaskRecord } from './task.js'
import { brokerMcpHeaders, openServers, serverSecrets } from '../resources/mcp-secrets.js'
import type { RunTokens } from './run-tokens.js'
import { agentModelAllowed } from '../models.js'

export interface MaterializeDeps {
  apiKeys: ApiKeysService
  secrets: SecretsService
  memory: MemoryService
  tools: ToolsService
  skills: SkillsService
  agents: AgentsService
  /** Decrypts the credentials in MCP server definitions (a sealed value without it fails the task). */
  cipher?: Cipher
  /** Git credentials for profiles linked to connected accounts (none without it). */
  gitAccounts?: GitAccountsService
  /**
   * The credential broker: with it, the model key, brokered secrets and (with a proxy) Git
   * tokens and remote MCP servers' headers stay outside the container, and the run gets a
   * capability token instead.
   */
  broker?: BrokerPlan
}

/** Where a container finds the broker (paths inside it), and the tokens that open it. */
export interface BrokerPlan {
  tokens: RunTokens
  gateway_socket: string
  proxy_socket: string | null
  ca_file: string | null
}

/**
 * True when a run reaches its model through the broker's gateway (which then holds the key
 * and counts every call); the `stub` provider's model is served by the runner itself.
 */
function usesGateway(provider: RunnerInput['model']['provider'], broker: object | undefined): boolean {
  return broker !== undefined && provider !== 'stub'
}

/** Who counts a run's model calls: the gateway when the input sends the model through it, else the runner. */
export function meteredBy(input: RunnerInput): 'gateway' | 'runner' {
  return usesGateway(input.model.provider, input.broker) ? 'gateway' : 'runner'
}

/** Where the runner works inside the container. */
export const WORKSPACE_DIR = '/workspace'

/** The event file of a task inside its container. */
export function eventsFile(taskId: string): string {
  return `${WORKSPACE_DIR}/.berth/events/${taskId}.jsonl`
}

/**
 * Resolve everything one prompt needs into the runner's input: the profile's model and
 * credential, tools (profile defaults unless the task overrides), MCP servers (the
 * profile's and the caller's tools in scope), CLAUDE.md, memory when enabled, skills,
 * agents, the secrets in scope as environment, whose values the runner redacts, and the
 * credentials of the profile's Git accounts (tokens refreshed when due, redacted too).
 * With a broker, the credentials it holds are placeholders or absent (docs/CREDENTIALS.md).
 *
 * @example
 * ```ts
 * const input = await materialize(deps, task, profile, workspace)
 * await runtime.exec(id, { cmd: ['berth-runner'], stdin: JSON.stringify(input) })
 * ```
 */
export async function materialize(
  deps: MaterializeDeps,
  task: Pick<
    TaskRecord,
    | 'id'
    | 'owner_id'
    | 'prompt'
    | 'allowed_tools'
    | 'max_turns'
    | 'max_budget_usd'
    | 'require_approval'
    | 'approval_timeout_s'
    | 'output_schema'
  >,
  profile: ProfileRecord,
  workspace: WorkspaceRecord,
): Promise<RunnerInput> {
  const owner = task.owner_id
  const credential = await deps.apiKeys.resolve(owner, profile.api_key_id).catch(() => {
    throw new ApiError('MODEL_ERROR', `The profile's model credential ${profile.api_key_id} no longer exists`)
  })
  const model = workspace.model_override ?? profile.model
  const allowed = (await deps.apiKeys.models(owner, profile.api_key_id)).map((m) => m.id)
  // Rules checked when a profile is saved may have changed since: check them again now.
  if (model !== null && !allowed.includes(model)) {
    const where = workspace.model_override ? "the workspace's model_override" : "the profile's model"
    throw new ApiError(
      'MODEL_ERROR',
      `Model "${model}" (${where}) is not allowed by model credential ${profile.api_key_id}`,
    )
  }
  const { broker } = deps
  // Their credentials only ever go to the gateway: without a broker there is no way to use them.
  if (!broker && (credential.bedrock || credential.vertex))
    throw new ApiError(
      'MODEL_ERROR',
      `Model credential ${profile.api_key_id} (${credential.provider}) needs the credential broker, which is off (BERTH_BROKER=off)`,
    )
  const [secrets, memory, tools, skills, agents, git] = await Promise.all([
    deps.secrets.forTask(owner, profile.id),
    profile.memory_enabled ? deps.memory.forProfile(owner, profile.id) : Promise.resolve([]),
    deps.tools.forProfile(owner, profile.id),
    deps.skills.forProfile(owner, profile.id),
    deps.agents.forProfile(owner, profile.id),
    deps.gitAccounts && profile.git_account_ids?.length
      ? deps.gitAccounts.credentials(owner, profile.git_account_ids)
      : Promise.resolve([]),
  ])
  for (const a of agents) {
    if (a.model !== null && !agentModelAllowed(a.model, allowed)) {
      throw new ApiError(
        'MODEL_ERROR',
        `Agent "${a.name}" uses model "${a.model}", which model credential ${profile.api_key_id} does not allow`,
      )
    }
  }
  const opened = openServers(profile.mcp_servers, tools, deps.cipher)
  // With a proxy, remote MCP servers' headers hold placeholders the proxy fills in for the server's host.
  const mcp = broker?.proxy_socket ? brokerMcpHeaders(opened).servers : opened
  // A brokered secret's variable holds its placeholder, never its value (with or without a proxy to fill it in).
  const env = Object.fromEntries(secrets.map((s) => [s.name, s.delivery === 'env' ? s.value : s.placeholder]))
  const gateway = usesGateway(credential.provider, broker)
  // Git tokens go to the proxy when there is one; otherwise to the runner's credential helper.
  const gitInContainer = broker?.proxy_socket ? [] : git
  // The redaction list is part of the input: only values the container holds anyway go in it.
  const redact = [
    ...secrets.flatMap((s) => (s.delivery === 'env' ? [s.value] : [])),
    ...(credential.key && !gateway ? [credential.key] : []),
    ...gitInContainer.map((g) => g.token),
    ...Object.values(mcp).flatMap((server) =>
      broker?.proxy_socket && server.type !== 'stdio' ? [] : serverSecrets(server),
    ),
  ].filter((s) => s.length >= 4)
  return {
    protocol: 1,
    task_id: task.id,
    prompt: task.prompt,
    model: {
      provider: credential.provider,
      model,
      base_url: gateway ? null : credential.base_url,
      api_key: gateway ? null : credential.key,
      // Not secret: Claude Code names them in its requests, and the gateway uses the credential's own.
      ...(credential.bedrock && { region: credential.bedrock.region }),
      ...(credential.vertex && { region: credential.vertex.region, project_id: credential.vertex.project_id }),
    },
    allowed_tools: task.allowed_tools ?? profile.default_tools,
    mcp_servers: mcp,
    claude_md: profile.claude_md,
    memory: memory.map((m) => ({ type: m.type, name: m.name, body: m.body })),
    skills: skills.map((s) => ({ name: s.name, description: s.description, body: s.body })),
    agents: agents.map((a) => ({
      name: a.name,
      description: a.description,
      prompt: a.prompt,
      tools: a.tools,
      model: a.model,
    })),
    max_turns: task.max_turns,
    max_budget_usd: task.max_budget_usd,
    resume: workspace.sdk_session_id,
    // The submission's rules replace the profile's; profiles from before approvals have none.
    require_approval: task.require_approval ?? profile.require_approval ?? [],
    approval_timeout_s: task.approval_timeout_s ?? profile.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S,
    ...(task.output_schema && { output_schema: task.output_schema }),
    env,
    redact,
    cwd: WORKSPACE_DIR,
    events_file: eventsFile(task.id),
    ...(broker && {
      broker: {
        gateway_socket: broker.gateway_socket,
        proxy_socket: broker.proxy_socket,
        ca_file: broker.ca_file,
        token: broker.tokens.issue(task.id),
      },
    }),
    // Written by the runner as a git credential helper outside the workspace, never into the environment.
    ...(gitInContainer.length > 0 && { git_credentials: gitInContainer }),
  }
}
