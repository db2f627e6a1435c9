import * as v from 'valibot'
import { McpServer } from './schemas/profile.js'

/**
 * The protocol between the server and `@berth/runner`, the program inside a task's
 * container. The server execs the runner with one {@link RunnerInput} as a JSON line on
 * stdin, followed by {@link RunnerControl} lines while the run goes on; the runner writes
 * one {@link RunnerEvent} per line on stdout and appends the same lines to `events_file`,
 * so a result is never lost when the server is down.
 */

/**
 * The model endpoint a run talks to. `stub`: the runner serves the offline model itself.
 * `bedrock` and `vertex` run only through the broker's model gateway, which holds their
 * credentials: Claude Code speaks the provider's protocol to it (docs/CREDENTIALS.md).
 */
export const RunnerModel = v.object({
  provider: v.picklist(['anthropic', 'bedrock', 'vertex', 'stub']),
  /** Model id, e.g. `claude-sonnet-4-5` (null: the SDK's default). */
  model: v.nullable(v.string()),
  /** Anthropic-compatible base URL (null: the provider's default). */
  base_url: v.nullable(v.string()),
  /** The credential (null for `stub`, and through the gateway). Never echoed in any event. */
  api_key: v.nullable(v.string()),
  /** `bedrock`, `vertex`: the region Claude Code is told (`AWS_REGION`, `CLOUD_ML_REGION`); the gateway uses the credential's. */
  region: v.optional(v.nullable(v.string())),
  /** `vertex`: the project Claude Code is told (`ANTHROPIC_VERTEX_PROJECT_ID`); the gateway uses the credential's. */
  project_id: v.optional(v.nullable(v.string())),
})

export const RunnerSkill = v.object({ name: v.string(), description: v.string(), body: v.string() })
export const RunnerAgent = v.object({
  name: v.string(),
  description: v.string(),
  prompt: v.string(),
  tools: v.nullable(v.array(v.string())),
  model: v.nullable(v.string()),
})

/** Everything one prompt needs, resolved by the server from the task, profile and catalog. */
export const RunnerInput = v.object({
  protocol: v.literal(1),
  task_id: v.string(),
  prompt: v.string(),
  model: RunnerModel,
  /** Tools the agent may use without asking (SDK `allowedTools`). */
  allowed_tools: v.array(v.string()),
  mcp_servers: v.record(v.string(), McpServer),
  /** The profile's CLAUDE.md text (appended to the system prompt). */
  claude_md: v.string(),
  /** Memory rows, most important first (appended to the system prompt). */
  memory: v.array(v.object({ type: v.string(), name: v.string(), body: v.string() })),
  /** Written to `<cwd>/.claude/skills/<name>/SKILL.md` before the run. */
  skills: v.array(RunnerSkill),
  /** Subagents (SDK `agents`). */
  agents: v.array(RunnerAgent),
  max_turns: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1))),
  max_budget_usd: v.nullable(v.pipe(v.number(), v.minValue(0))),
  /** The SDK session to resume (session follow-ups), or null for a new conversation. */
  resume: v.nullable(v.string()),
  /**
   * Tool rules whose calls wait for a decision (the SDK's permission syntax: `Bash`,
   * `Bash(git push:*)`, `mcp__pay__*`): the runner writes a `permission_request` and waits
   * for a `decision` control line, denying at `approval_timeout_s`. Absent: none.
   */
  require_approval: v.optional(v.array(v.string())),
  approval_timeout_s: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  /** A JSON Schema for the answer (the SDK's structured output); the result then carries `structured_output`. */
  output_schema: v.optional(v.record(v.string(), v.unknown())),
  /** Environment for the agent's tools (the secrets that apply). */
  env: v.record(v.string(), v.string()),
  /** Values to replace with `[REDACTED]` in every event the runner writes. */
  redact: v.array(v.string()),
  cwd: v.string(),
  /** Where the runner appends every event line (JSONL), e.g. `/workspace/.berth/events/<task_id>.jsonl`. */
  events_file: v.string(),
  /**
   * How the run reaches Berth's credential broker, through unix sockets in a host directory
   * mounted into the container (they work under every network policy, `none` included).
   * With it, `model.api_key` is null and the model is reached through the gateway: the
   * runner forwards a loopback port to `gateway_socket` and gives Claude Code that URL and
   * `token`, the run's capability token, as its key. The real key never enters the container.
   */
  broker: v.optional(
    v.object({
      gateway_socket: v.string(),
      /** The egress proxy (HTTP CONNECT) that adds brokered secrets and Git tokens to requests; the runner sets `HTTPS_PROXY` and friends to a loopback port forwarded to it. */
      proxy_socket: v.nullable(v.string()),
      /** The deployment CA the proxy signs intercepted hosts with (PEM); the runner adds it to the trust stores. */
      ca_file: v.nullable(v.string()),
      /** The run's capability token: the gateway's key and the proxy's password. Useless once the task ended. */
      token: v.string(),
    }),
  ),
  /**
   * Git credentials per host (`host[:port]` → username and token, optionally a CA to trust
   * there). The runner serves them to git through a credential helper reading a 0600 file
   * outside the workspace, removed when the run ends; they never enter the environment and
   * every token is redacted from events.
   */
  git_credentials: v.optional(
    v.array(
      v.object({
        host: v.pipe(v.string(), v.regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, 'must be host or host:port')),
        username: v.pipe(v.string(), v.regex(/^[^\s:]{1,200}$/, 'must be a username without whitespace or colons')),
        token: v.pipe(v.string(), v.regex(/^[^\s]{1,4096}$/, 'must be a token without whitespace')),
        ca_pem: v.optional(v.string()),
      }),
    ),
  ),
})

/** A count or an amount of money a runner reports: never negative (a forged negative would lower a caller's spend). */
const Amount = v.pipe(v.number(), v.minValue(0))
const Usage = { input_tokens: Amount, output_tokens: Amount }

/**
 * One model's share of a run's own model calls, as the runner metered them: each answer
 * the offline model it serves gave (provider `stub`), or each answer streamed to it
 * (otherwise), priced with the contract's table (`costOf`). A resumed or forked
 * conversation starts from zero: the SDK's running total, which carries the earlier
 * tasks' spend, is not used. The server records these for a run that did not go through
 * its model gateway; where the gateway served the run, its own count stands instead.
 */
export const RunnerModelUsage = v.object({
  model: v.string(),
  /** Model calls (answers) of this model. */
  calls: Amount,
  input_tokens: Amount,
  output_tokens: Amount,
  cache_read_tokens: Amount,
  cache_write_tokens: Amount,
  cost_usd: Amount,
})

/** A tool call with the input it ran with; `original_input` is the agent's when an approval replaced it. */
export const ToolCall = v.object({
  id: v.string(),
  name: v.string(),
  input: v.unknown(),
  original_input: v.optional(v.unknown()),
})

/** How a run ended. `interrupted`: an `interrupt` control line stopped it; `error_output_invalid`: no answer valid for `output_schema`. */
export const RunnerOutcome = v.picklist([
  'success',
  'error_max_turns',
  'error_max_budget_usd',
  'model_error',
  'error_during_execution',
  'interrupted',
  'error_output_invalid',
])

/** One line the runner writes. `seq` and `at` are added when the server stores it. */
export const RunnerEvent = v.variant('type', [
  v.object({ type: v.literal('user_message'), text: v.string() }),
  v.object({ type: v.literal('turn_start'), turn: v.number() }),
  /** A text delta as the model streams it. */
  v.object({ type: v.literal('token'), text: v.string() }),
  v.object({ type: v.literal('tool_call'), id: v.string(), name: v.string(), input: v.unknown() }),
  /** A tool call that waits for a decision (a `require_approval` rule matched). */
  v.object({ type: v.literal('permission_request'), request_id: v.string(), tool: v.string(), input: v.unknown() }),
  /**
   * How a permission request was decided: by a person (`caller`), or denied at its timeout.
   * An `allow` that replaced the tool's input carries the `input` the tool runs with and the
   * agent's as `original_input` (otherwise the tool runs with the request's `input`).
   */
  v.object({
    type: v.literal('permission_decision'),
    request_id: v.string(),
    decision: v.picklist(['allow', 'deny']),
    message: v.nullable(v.string()),
    by: v.picklist(['caller', 'timeout']),
    input: v.optional(v.unknown()),
    original_input: v.optional(v.unknown()),
  }),
  v.object({ type: v.literal('tool_result'), id: v.string(), output: v.string(), is_error: v.boolean() }),
  v.object({ type: v.literal('turn_end'), turn: v.number(), ...Usage }),
  v.object({
    type: v.literal('result'),
    outcome: RunnerOutcome,
    text: v.string(),
    tool_calls: v.array(ToolCall),
    /** This run's own model calls in all (input counts cache reads and writes), and their cost: {@link RunnerModelUsage} summed. */
    ...Usage,
    cost_usd: Amount,
    /** The same calls by model (absent from runners before it: then the sums above are one group of the profile's model). */
    model_usage: v.optional(v.array(RunnerModelUsage)),
    turns: v.number(),
    /** The SDK session id, for resuming this conversation later. */
    session_id: v.nullable(v.string()),
    /** What went wrong, for outcomes other than success. */
    error: v.nullable(v.string()),
    /** The answer as `output_schema` asked for it (absent without one). */
    structured_output: v.optional(v.unknown()),
  }),
  v.object({ type: v.literal('error'), message: v.string() }),
  /**
   * Work the agent left running in the background (a `run_in_background` shell, a server, a
   * watcher, a background subagent) started (`running`) or ended. In a living session one
   * that ends between two tasks is written at the start of the next task, before its
   * `user_message` (the agent takes it up in that task).
   */
  v.object({
    type: v.literal('background_task'),
    id: v.string(),
    /** Claude Code's kind of task: `local_bash`, `local_agent`, `monitor`... */
    kind: v.string(),
    description: v.string(),
    status: v.picklist(['running', 'completed', 'failed', 'stopped']),
    /** What Claude Code said of its end (null while it runs). */
    summary: v.nullable(v.string()),
    /** When it started or ended (ISO 8601). */
    at: v.string(),
  }),
])

/**
 * What the server writes on a runner's stdin after its input, one JSON object per line,
 * while the run goes on (stdin stays open until the result): a decision on a permission
 * request, an interrupt of the current turn, a message for the agent's next turn boundary.
 * The runner ignores lines it cannot read (after an `error` event) and any line once its
 * result is written.
 */
export const RunnerControl = v.variant('type', [
  v.object({
    type: v.literal('decision'),
    request_id: v.string(),
    decision: v.picklist(['allow', 'deny']),
    message: v.optional(v.string()),
    /** Replaces the tool's input when allowing. */
    input: v.optional(v.record(v.string(), v.unknown())),
  }),
  v.object({ type: v.literal('interrupt') }),
  v.object({ type: v.literal('message'), text: v.string() }),
])

export type RunnerControl = v.InferOutput<typeof RunnerControl>
export type RunnerInput = v.InferOutput<typeof RunnerInput>
export type RunnerEvent = v.InferOutput<typeof RunnerEvent>
export type RunnerOutcome = v.InferOutput<typeof RunnerOutcome>
export type RunnerModelUsage = v.InferOutput<typeof RunnerModelUsage>
export type ToolCall = v.InferOutput<typeof ToolCall>
