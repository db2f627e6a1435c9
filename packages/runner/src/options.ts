import { spawnAs, type AgentUser } from './agent-user.js'
import type { CanUseTool, Options } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerInput } from '@berth/contract'
import { askForRules } from './approvals.js'
import { brokerEnv, type BrokerAccess } from './broker.js'
import { PROVIDER_VARIABLES } from './provider-env.js'
import { autoAllowed } from './rules.js'
import { claudeExecutable } from './platform.js'
import { configDir, systemAppend } from './workspace.js'

/** The model the `stub` provider runs as when the input names none (its prices give costs). */
export const STUB_MODEL = 'claude-sonnet-4-5'

/** What {@link sdkOptions} needs beyond the input. */
export interface SdkOptionsContext {
  /** Base URL of the offline model the runner started (provider `stub`). */
  stubUrl?: string
  /** Skill names written to the workspace, to enable. */
  skills: string[]
  abortController: AbortController
  /** The environment to start from (default `process.env`). */
  baseEnv?: NodeJS.ProcessEnv
  /** Added after the task's `env` (the git credential helper's configuration). */
  extraEnv?: Record<string, string> | undefined
  /** The credential broker opened for the run: its gateway, proxy and CA (see `broker.ts`). */
  broker?: BrokerAccess | undefined
  stderr?: (data: string) => void
  /** Start Claude Code (and so every tool) as this user: the runner is root in an engine container (`agent-user.ts`). */
  agentUser?: AgentUser | null
  /** With `require_approval`: the gate deciding each call that is not auto-allowed (`approvals.ts`). */
  canUseTool?: CanUseTool
}

/**
 * The environment of the Claude Code process (and so of the agent's tools): the runner's
 * own, the task's `env`, the git credential helper's settings, then what the model
 * endpoint needs, which wins (with a broker: its gateway, proxy and CA).
 *
 * @example
 * ```ts
 * sdkEnv(input, { stubUrl: 'http://127.0.0.1:4000' }).ANTHROPIC_BASE_URL // 'http://127.0.0.1:4000'
 * ```
 */
export function sdkEnv(
  input: RunnerInput,
  ctx: Pick<SdkOptionsContext, 'stubUrl' | 'baseEnv' | 'extraEnv' | 'broker'>,
): Record<string, string | undefined> {
  const stub = input.model.provider === 'stub'
  const env: Record<string, string | undefined> = { ...(ctx.baseEnv ?? process.env), ...input.env, ...ctx.extraEnv }
  for (const k of PROVIDER_VARIABLES) delete env[k]
  const baseUrl = stub ? ctx.stubUrl : input.model.base_url
  if (baseUrl) env.ANTHROPIC_BASE_URL = baseUrl
  // The stub accepts any key; the SDK refuses to start without one.
  const key = stub ? 'sk-berth-stub' : input.model.api_key
  if (key) env.ANTHROPIC_API_KEY = key
  // Through the broker the key is the run's capability token, the endpoint a loopback port.
  if (ctx.broker && input.broker)
    Object.assign(env, brokerEnv(ctx.broker, input.broker.token, stub ? null : input.model))
  env.CLAUDE_CONFIG_DIR = configDir(input.cwd)
  env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = '1'
  env.DISABLE_AUTOUPDATER = '1'
  // A scripted API error from the stub should fail now, not after ~100 s of retries.
  if (stub) env.CLAUDE_CODE_MAX_RETRIES = '0'
  else env.CLAUDE_CODE_MAX_RETRIES ??= '3'
  return env
}

/**
 * The Claude Agent SDK options for one run.
 *
 * Permissions: `dontAsk` runs the tools in `allowedTools` without asking and denies every
 * other tool (the model gets a denial it can react to). Nothing ever waits for a human,
 * it works as root (unlike `bypassPermissions`, which needs `IS_SANDBOX=1` there), and
 * the profile's tool list stays the real limit. With `require_approval` (and a
 * `canUseTool` gate) the mode is `default`: the tools a rule covers leave `allowedTools`,
 * so the SDK asks the gate for them, and the gate asks a person (it works as root too).
 * With `output_schema`, the SDK's structured output (`outputFormat`).
 *
 * @example
 * ```ts
 * const opts = sdkOptions(input, { skills: [], abortController: new AbortController() })
 * for await (const m of query({ prompt: input.prompt, options: opts })) { ... }
 * ```
 */
export function sdkOptions(input: RunnerInput, ctx: SdkOptionsContext): Options {
  const append = systemAppend(input)
  const options: Options = {
    cwd: input.cwd,
    model: input.model.model ?? (input.model.provider === 'stub' ? STUB_MODEL : undefined),
    allowedTools: input.allowed_tools,
    permissionMode: 'dontAsk',
    permissionPrompts: 'none',
    ...(input.require_approval?.length && ctx.canUseTool
      ? {
          allowedTools: autoAllowed(input.allowed_tools, input.require_approval),
          permissionMode: 'default' as const,
          permissionPrompts: 'host' as const,
          canUseTool: ctx.canUseTool,
          hooks: { PreToolUse: [askForRules(input.require_approval)] },
        }
      : {}),
    ...(input.output_schema ? { outputFormat: { type: 'json_schema' as const, schema: input.output_schema } } : {}),
    mcpServers: input.mcp_servers,
    // Over stdin, so MCP env and headers (secrets) stay off the command line.
    mcpServersDelivery: 'initialize',
    systemPrompt: { type: 'preset', preset: 'claude_code', ...(append ? { append } : {}) },
    agents: Object.fromEntries(
      input.agents.map((a) => [
        a.name,
        {
          description: a.description,
          prompt: a.prompt,
          ...(a.tools ? { tools: a.tools } : {}),
          ...(a.model ? { model: a.model } : {}),
        },
      ]),
    ),
    // `project` loads <cwd>/.claude (skills, settings) and CLAUDE.md files from the workspace.
    settingSources: ['project'],
    includePartialMessages: true,
    env: sdkEnv(input, ctx),
    abortController: ctx.abortController,
  }
  // Found here, so the runner works from a bundle (node_modules beside it) and from an install.
  const executable = claudeExecutable(import.meta.url)
  if (executable) options.pathToClaudeCodeExecutable = executable
  if (ctx.skills.length) options.skills = ctx.skills
  if (input.max_turns !== null) options.maxTurns = input.max_turns
  // Not the SDK's `maxBudgetUsd`: it counts every call of the process, and a session's living
  // agent serves many tasks. Each task's own calls are held to it (`TaskTurn`).
  if (input.resume) options.resume = input.resume
  if (ctx.agentUser) options.spawnClaudeCodeProcess = spawnAs(ctx.agentUser, ctx.stderr)
  else if (ctx.stderr) options.stderr = ctx.stderr
  return options
}
