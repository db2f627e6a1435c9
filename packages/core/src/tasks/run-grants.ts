/**
 * What a run may do outside its container, and the capability token that proves which run
 * asks. The model gateway and the egress proxy (both in `@berth/server`'s `broker/`) call
 * {@link RunGrants} with the token a request carries and get back what they may do for it:
 * the real model credential, the brokered secrets, remote MCP servers' headers and Git
 * tokens, the task's network policy. Nothing is granted once the task ended. See docs/CREDENTIALS.md.
 */
import { isEndedStatus, type ServiceAccountKey } from '@berth/contract'
import type { EgressPolicy } from '../ports/container-runtime.js'
import type { Store } from '../ports/store.js'
import type { ResolvedCredential } from '../resources/api-keys.js'
import type { EnvironmentsService } from '../resources/environments.js'
import { brokerMcpHeaders, openServers } from '../resources/mcp-secrets.js'
import type { ProfilesService } from '../resources/profiles.js'
import { endpointHosts } from './engine.js'
import type { MaterializeDeps } from './materialize.js'
import type { TaskRecord } from './task.js'
import { subjectKey, type RunTokens } from './run-tokens.js'
import type { Budgets, MonthlyLimit } from '../usage/budgets.js'

/** The Anthropic API (or an Anthropic-compatible endpoint) and its key. */
export interface AnthropicUpstream {
  provider?: 'anthropic'
  base_url: string
  api_key: string
}

/** Amazon Bedrock: requests are signed with SigV4 for service `bedrock` in `region`. */
export interface BedrockUpstream {
  provider: 'bedrock'
  /** `https://bedrock-runtime.<region>.amazonaws.com`, or the credential's `base_url`. */
  base_url: string
  region: string
  access_key_id: string
  secret_access_key: string
  session_token: string | null
}

/** Google Vertex AI: requests carry an access token minted from the service account's key. */
export interface VertexUpstream {
  provider: 'vertex'
  /** `https://<region>-aiplatform.googleapis.com/v1` (`https://aiplatform.googleapis.com/v1` for `global`), or the credential's `base_url`. */
  base_url: string
  project_id: string
  region: string
  service_account: ServiceAccountKey
}

/** Where the gateway forwards a run's model calls, with what it needs to authenticate there. */
export type GatewayUpstream = AnthropicUpstream | BedrockUpstream | VertexUpstream

/** What the model gateway may do for a run. */
export interface GatewayGrant {
  task_id: string
  owner_id: string
  profile_id: string
  upstream: GatewayUpstream
  /** Model ids as the profile names them → the provider's ids (Bedrock, Vertex; empty for Anthropic). */
  model_map?: Record<string, string> | undefined
  /** Model patterns (`*` wildcards) the credential allows, or null for any. */
  allowed_models: string[] | null
  max_budget_usd: number | null
  /** The task's trace context (W3C `traceparent`): model calls are traced as its children. */
  trace?: string | undefined
  /**
   * The caller's and the profile's monthly limits (those set), with the month's spend
   * against each as the shared ledger had it when the grant was read: the gateway holds
   * each call to what is left of them and refuses calls once one is spent.
   */
  monthly_limits: MonthlyLimit[]
}

/** What the egress proxy may do for a run. */
export interface ProxyGrant {
  task_id: string
  /** The task's owner (the audit log's entries of refused requests are theirs to see); absent in grants made by hand. */
  owner_id?: string
  egress: EgressPolicy
  brokered: { placeholder: string; value: string; hosts: string[] }[]
  git: { host: string; username: string; token: string; ca_pem?: string | undefined }[]
}

export interface RunGrantsOptions {
  store: Store
  tokens: RunTokens
  catalog: MaterializeDeps
  profiles: ProfilesService
  environments: EnvironmentsService
  /** Monthly limits, read on each model call (absent: none). */
  budgets?: Budgets | undefined
}

const DEFAULT_BASE_URL = 'https://api.anthropic.com'

/** The upstream of a resolved credential, or null when it has nothing the gateway can use (`stub`, a missing secret). */
function upstreamOf(c: ResolvedCredential): GatewayUpstream | null {
  if (c.bedrock) {
    const { region } = c.bedrock
    return {
      provider: 'bedrock',
      base_url: c.base_url ?? `https://bedrock-runtime.${region}.amazonaws.com`,
      ...c.bedrock,
    }
  }
  if (c.vertex) {
    const { region } = c.vertex
    const host = region === 'global' ? 'aiplatform.googleapis.com' : `${region}-aiplatform.googleapis.com`
    return { provider: 'vertex', base_url: c.base_url ?? `https://${host}/v1`, ...c.vertex }
  }
  if (c.provider !== 'anthropic' || !c.key) return null
  return { base_url: c.base_url ?? DEFAULT_BASE_URL, api_key: c.key }
}

/**
 * Grants by capability token, for a task that has not ended. Each call reads the task (so
 * the moment it ends, its token is worth nothing, on every instance) and what the grant
 * needs (credential, secrets, accounts), so a change to them applies to the next request.
 *
 * @example
 * ```ts
 * const grant = await grants.gateway(token) // null: refuse
 * ```
 */
export class RunGrants {
  constructor(private readonly o: RunGrantsOptions) {}

  async gateway(token: string): Promise<GatewayGrant | null> {
    const task = await this.task(token)
    if (!task) return null
    const owner = task.owner_id
    const profile = await this.o.profiles.records.find(owner, task.profile_id)
    if (!profile) return null
    const apiKeys = this.o.catalog.apiKeys
    const record = await apiKeys.records.find(owner, profile.api_key_id)
    const credential = record && (await apiKeys.resolve(owner, profile.api_key_id))
    const upstream = credential && upstreamOf(credential)
    if (!record || !credential || !upstream) return null
    return {
      task_id: task.id,
      owner_id: owner,
      profile_id: profile.id,
      upstream,
      model_map: credential.model_map,
      allowed_models: record.allowed_models,
      max_budget_usd: task.max_budget_usd,
      trace: task.trace,
      // Read from the store on every call: what other instances' calls spent counts once they settled.
      monthly_limits: (await this.o.budgets?.limits(owner, profile)) ?? [],
    }
  }

  async proxy(token: string): Promise<ProxyGrant | null> {
    const task = await this.task(token)
    if (!task) return null
    const owner = task.owner_id
    const profile = await this.o.profiles.records.find(owner, task.profile_id)
    if (!profile) return null
    const { catalog } = this.o
    const [secrets, git, hosts, tools] = await Promise.all([
      catalog.secrets.forTask(owner, profile.id),
      catalog.gitAccounts && profile.git_account_ids?.length
        ? catalog.gitAccounts.credentials(owner, profile.git_account_ids)
        : Promise.resolve([]),
      endpointHosts(catalog, profile),
      catalog.tools.forProfile(owner, profile.id),
    ])
    // The same mapping materialize put in the runner's input: placeholders from names, values for the server's host.
    const mcp = brokerMcpHeaders(openServers(profile.mcp_servers, tools, catalog.cipher)).brokered
    // The profile's Git hosts join an allowlist as its MCP servers do: linking an account says the agent uses it.
    const gitHosts = git.map((g) => g.host.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'))
    const env = await this.o.environments
      .resolve(owner, profile.environment_id, [...hosts, ...gitHosts])
      .catch(() => null)
    return {
      task_id: task.id,
      owner_id: owner,
      // An environment that is gone grants no network at all.
      egress: env?.network ?? { policy: 'none' },
      brokered: [
        ...secrets.flatMap((s) =>
          s.delivery === 'brokered' ? [{ placeholder: s.placeholder, value: s.value, hosts: s.hosts }] : [],
        ),
        ...mcp,
      ],
      git,
    }
  }

  /** The task a token speaks for, while it has not ended. */
  private async task(token: string): Promise<TaskRecord | null> {
    const subject = this.o.tokens.subject(token)
    if (!subject) return null
    let taskId = subject
    if (!subject.startsWith('task_')) {
      const bound = await this.o.store.get<{ task_id: string }>(subjectKey(subject))
      if (!bound) return null
      taskId = bound.task_id
    }
    const owner = await this.o.store.get<{ owner: string }>(`active-tasks:${taskId}`)
    if (!owner) return null
    const task = await this.o.store.get<TaskRecord>(`tasks:${owner.owner}:${taskId}`)
    return task && !isEndedStatus(task.status) ? task : null
  }
}
