import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Description, Id, ProfileIds, RecordMeta, Scope } from './common.js'
import { McpServer, ModelId, ToolName } from './profile.js'

/**
 * Tools, skills and agents share one surface (list/create/get/update/delete) and one
 * naming rule: a name unique per owner that becomes a file or server name in the
 * container, and a scope saying which of the caller's profiles get it.
 */
export const CatalogName = v.pipe(
  v.string(),
  v.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be lowercase letters, digits, _ and - (max 64)'),
)

const scoped = {
  scope: Scope,
  profile_ids: v.array(Id('profile')),
}
const scopedInput = {
  scope: v.optional(Scope),
  profile_ids: v.optional(ProfileIds),
}

/** A tool: an MCP server (local command or remote endpoint) the agent can call. */
export const Tool = v.object({
  id: Id('tool'),
  name: CatalogName,
  description: Description,
  server: McpServer,
  ...scoped,
  ...RecordMeta,
})
export const CreateTool = v.strictObject({
  name: CatalogName,
  description: v.optional(Description),
  server: McpServer,
  ...scopedInput,
})
export const UpdateTool = v.partial(CreateTool)

const SkillBody = v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(256 * 1024))

/** A skill: a SKILL.md body the agent loads when the skill is relevant. */
export const Skill = v.object({
  id: Id('skill'),
  name: CatalogName,
  description: Description,
  /** Markdown instructions, written to `.claude/skills/<name>/SKILL.md`. */
  body: SkillBody,
  ...scoped,
  ...RecordMeta,
})
export const CreateSkill = v.strictObject({
  name: CatalogName,
  description: v.optional(Description),
  body: SkillBody,
  ...scopedInput,
})
export const UpdateSkill = v.partial(CreateSkill)

const AgentPrompt = v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(128 * 1024))

/** An agent: a named subagent with its own system prompt, tools and model. */
export const Agent = v.object({
  id: Id('agent'),
  name: CatalogName,
  description: Description,
  prompt: AgentPrompt,
  /** Tools the subagent may use; `null` inherits the main agent's tools. */
  tools: v.nullable(v.array(ToolName)),
  model: v.nullable(ModelId),
  ...scoped,
  ...RecordMeta,
})
export const CreateAgent = v.strictObject({
  name: CatalogName,
  description: v.optional(Description),
  prompt: AgentPrompt,
  tools: v.optional(v.nullable(v.pipe(v.array(ToolName), maxLength(200)))),
  model: v.optional(v.nullable(ModelId)),
  ...scopedInput,
})
export const UpdateAgent = v.partial(CreateAgent)

export type Tool = v.InferOutput<typeof Tool>
export type Skill = v.InferOutput<typeof Skill>
export type Agent = v.InferOutput<typeof Agent>
