import { ApiError } from '../errors.js'
import type { RunnerInput } from '../runner-protocol.js'
import type { ApiKeysService } from './api-keys.js'
import type { AgentsService, SecretsService, SkillsService, ToolsService } from './catalog.js'
import type { GitAccountsService } from './git-accounts.js'
import type { MemoryService } from './memory.js'
import type { ProfileRecord } from './profiles.js'
import type { WorkspaceRecord } from './workspaces.js'

/** What a task contributes to its run. */
export interface TaskSpec {
  id: string
  owner_id: string
  prompt: string
  allowed_tools: string[] | null
  max_turns: number | null
  max_budget_usd: number | null
}

export interface MaterializeDeps {
  apiKeys: ApiKeysService
  secrets: SecretsService
  memory: MemoryService
  tools: ToolsService
  skills: SkillsService
  agents: AgentsService
  /** Git credentials for profiles linked to connected accounts (none without it). */
  gitAccounts?: GitAccountsService
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
 *
 * @example
 * ```ts
 * const input = await materialize(deps, task, profile, workspace)
 * await runtime.exec(id, { cmd: ['berth-runner'], stdin: JSON.stringify(input) })
 * ```
 */
export async function materialize(
  deps: MaterializeDeps,
  task: TaskSpec,
  profile: ProfileRecord,
  workspace: WorkspaceRecord,
): Promise<RunnerInput> {
  const owner = task.owner_id
  const credential = await deps.apiKeys.resolve(owner, profile.api_key_id).catch(() => {
    throw new ApiError('MODEL_ERROR', `The profile's model credential ${profile.api_key_id} no longer exists`)
  })
  const [env, memory, tools, skills, agents, git] = await Promise.all([
    deps.secrets.environment(owner, profile.id),
    profile.memory_enabled ? deps.memory.forProfile(owner, profile.id) : Promise.resolve([]),
    deps.tools.forProfile(owner, profile.id),
    deps.skills.forProfile(owner, profile.id),
    deps.agents.forProfile(owner, profile.id),
    deps.gitAccounts && profile.git_account_ids?.length ? deps.gitAccounts.credentials(owner, profile.git_account_ids) : Promise.resolve([]),
  ])
  const mcp = { ...profile.mcp_servers }
  for (const t of tools) mcp[t.name] = t.server
  const redact = [...Object.values(env), ...(credential.key ? [credential.key] : []), ...git.map((g) => g.token)].filter((s) => s.length >= 4)
  return {
    protocol: 1,
    task_id: task.id,
    prompt: task.prompt,
    model: {
      provider: credential.provider,
      model: workspace.model_override ?? profile.model,
      base_url: credential.base_url,
      api_key: credential.key,
    },
    allowed_tools: task.allowed_tools ?? profile.default_tools,
    mcp_servers: mcp,
    claude_md: profile.claude_md,
    memory: memory.map((m) => ({ type: m.type, name: m.name, body: m.body })),
    skills: skills.map((s) => ({ name: s.name, description: s.description, body: s.body })),
    agents: agents.map((a) => ({ name: a.name, description: a.description, prompt: a.prompt, tools: a.tools, model: a.model })),
    max_turns: task.max_turns,
    max_budget_usd: task.max_budget_usd,
    resume: workspace.sdk_session_id,
    env,
    redact,
    cwd: WORKSPACE_DIR,
    events_file: eventsFile(task.id),
    // Written by the runner as a git credential helper outside the workspace, never into the environment.
    ...(git.length > 0 && { git_credentials: git }),
  }
}
