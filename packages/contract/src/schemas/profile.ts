import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Description, Id, Name, RecordMeta, StringMap } from './common.js'
import { GitAccountIds } from './git-account.js'
import { MonthlyBudget } from './usage.js'

/** Lowercase URL-safe identifier: `^[a-z0-9][a-z0-9-]{0,62}$`. */
export const Slug = v.pipe(
  v.string(),
  v.regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and dashes (max 63)'),
)

/** A tool name or permission rule as the agent SDK takes it, e.g. `Bash`, `Read`, `Bash(git:*)`. */
export const ToolName = v.pipe(
  v.string(),
  minLength(1),
  maxLength(200),
  v.regex(/^[^\s]/, 'must not start with whitespace'),
)

/**
 * Tool rules that need a person's approval before the tool runs, in the SDK's permission
 * syntax: a tool name (`Bash`, `Write`), a tool with an argument pattern (`Bash(git push:*)`:
 * a Bash command starting with `git push`), or a name pattern (`mcp__pay__*`).
 */
export const ApprovalRules = v.pipe(v.array(ToolName), maxLength(100))

/** How long a permission request waits for a decision before it is denied (seconds). */
export const ApprovalTimeout = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(86_400))

/** Default of {@link ApprovalTimeout}: 15 minutes. */
export const DEFAULT_APPROVAL_TIMEOUT_S = 900

/** A model identifier, e.g. `claude-sonnet-4-5`. */
export const ModelId = v.pipe(v.string(), v.regex(/^[a-zA-Z0-9][a-zA-Z0-9._:@-]{0,127}$/, 'must be a model id'))

const HttpUrl = v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//i, 'must be an http(s) URL'), maxLength(2000))

/** An MCP server the agent can use: a local command (stdio) or a remote endpoint (http/sse). */
export const McpServer = v.variant('type', [
  v.strictObject({
    type: v.literal('stdio'),
    command: v.pipe(v.string(), minLength(1), maxLength(1000)),
    args: v.optional(v.pipe(v.array(v.pipe(v.string(), maxLength(2000))), maxLength(100))),
    env: v.optional(StringMap),
  }),
  v.strictObject({
    type: v.picklist(['http', 'sse']),
    url: HttpUrl,
    headers: v.optional(StringMap),
  }),
])

/** MCP servers by name (`^[A-Za-z0-9_-]{1,64}$`). */
export const McpServers = v.pipe(
  v.record(
    v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,64}$/, 'server names are letters, digits, _ and -')),
    McpServer,
  ),
  v.check((m) => Object.keys(m).length <= 50, 'at most 50 MCP servers'),
)

const ClaudeMd = v.pipe(v.string(), maxLength(256 * 1024))

const profileFields = {
  name: Name,
  slug: Slug,
  api_key_id: Id('apiKey'),
  description: Description,
  model: v.nullable(ModelId),
  default_tools: v.pipe(v.array(ToolName), maxLength(200)),
  mcp_servers: McpServers,
  claude_md: ClaudeMd,
  memory_enabled: v.boolean(),
  persistent_sessions: v.boolean(),
  /** Connected Git accounts whose credentials the profile's tasks get (through a credential helper). */
  git_account_ids: GitAccountIds,
  /** The environment its tasks run in; `null`: the operator's default environment. */
  environment_id: v.nullable(Id('environment')),
  /** Tools that wait for a person's approval (see {@link ApprovalRules}); `[]`: none. */
  require_approval: ApprovalRules,
  /** Seconds a permission request waits before it is denied (default 900). */
  approval_timeout_s: ApprovalTimeout,
  /** Spending limit of the profile's tasks per calendar month (UTC), in USD; `null`: none. */
  monthly_budget_usd: MonthlyBudget,
}

/** The full profile, `claude_md` included. */
export const Profile = v.object({
  id: Id('profile'),
  ...profileFields,
  ...RecordMeta,
})

/** A profile as listed: everything but `claude_md`. */
export const ProfileSummary = v.omit(Profile, ['claude_md'])

/**
 * Body of `POST /v1/profiles`: `name`, `slug` (unique per owner) and `api_key_id` required.
 * `git_account_ids` must be the caller's connected Git accounts.
 */
export const CreateProfile = v.strictObject({
  name: profileFields.name,
  slug: profileFields.slug,
  api_key_id: profileFields.api_key_id,
  description: v.optional(profileFields.description),
  model: v.optional(profileFields.model),
  default_tools: v.optional(profileFields.default_tools),
  mcp_servers: v.optional(profileFields.mcp_servers),
  claude_md: v.optional(profileFields.claude_md),
  memory_enabled: v.optional(profileFields.memory_enabled),
  persistent_sessions: v.optional(profileFields.persistent_sessions),
  git_account_ids: v.optional(profileFields.git_account_ids),
  environment_id: v.optional(profileFields.environment_id),
  require_approval: v.optional(profileFields.require_approval),
  approval_timeout_s: v.optional(profileFields.approval_timeout_s),
  monthly_budget_usd: v.optional(profileFields.monthly_budget_usd),
})

/** Body of `PATCH /v1/profiles/:id`: any subset of the create fields; `model: null` clears it. */
export const UpdateProfile = v.partial(CreateProfile)

export type Profile = v.InferOutput<typeof Profile>
export type ProfileSummary = v.InferOutput<typeof ProfileSummary>
export type CreateProfile = v.InferOutput<typeof CreateProfile>
export type UpdateProfile = v.InferOutput<typeof UpdateProfile>
export type McpServer = v.InferOutput<typeof McpServer>
