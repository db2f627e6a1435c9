import type { CanUseTool, HookCallbackMatcher, PermissionResult } from '@anthropic-ai/claude-agent-sdk'
import { newId, type RunnerEvent, type RunnerInput } from '@berth/contract'
import { firstMatch } from './rules.js'
import type { Steering } from './steer.js'

type PermissionDecision = Extract<RunnerEvent, { type: 'permission_decision' }>

/** How long a permission request waits for a decision when the input sets no `approval_timeout_s`. */
export const DEFAULT_APPROVAL_TIMEOUT_S = 900

/** What the model is told about a tool outside `allowed_tools`, as `dontAsk` would deny it. */
export const NOT_ALLOWED = 'This tool is not allowed for this task (not in its allowed tools).'

/**
 * The SDK's `canUseTool` for a run with `require_approval`. A call matching a rule writes
 * `permission_request`, waits for the `decision` control line with its id (or denies at
 * `approval_timeout_s`) and writes `permission_decision` (none when the run is cancelled or
 * interrupted while it waits: the request ends with the run); the denial's message reaches the
 * model as the tool's result, so the agent can go another way. An `allow` that replaces the
 * input runs the tool with the new one: the decision event carries both, and `ran` is told
 * (the result's `tool_calls` show what ran). A call matching no rule is allowed when
 * `allowed_tools` covers it and denied otherwise, as `dontAsk` does.
 *
 * @example
 * ```ts
 * options.canUseTool = approvalGate(input, steer, emit, () => stop.signal, (id, input) => transcript.ran(id, input))
 * ```
 */
export function approvalGate(
  input: RunnerInput,
  /** The task's steering (in a living session, the task under way's). */
  steer: Pick<Steering, 'decision'>,
  emit: (e: RunnerEvent) => void,
  /** The task's signal that aborts when it is cancelled or interrupted: no request waits past that. */
  stop: () => AbortSignal,
  /** Told of a tool call (by its tool-use id) allowed with a replaced input. */
  ran?: (toolUseId: string, input: Record<string, unknown>) => void,
): CanUseTool {
  const rules = input.require_approval ?? []
  const timeoutS = input.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S
  return async (tool, toolInput, { signal, toolUseID }): Promise<PermissionResult> => {
    if (!firstMatch(rules, tool, toolInput)) {
      if (firstMatch(input.allowed_tools, tool, toolInput)) return { behavior: 'allow', updatedInput: toolInput }
      return { behavior: 'deny', message: NOT_ALLOWED }
    }
    const requestId = newId('approval')
    emit({ type: 'permission_request', request_id: requestId, tool, input: toolInput })
    const timeout = AbortSignal.timeout(timeoutS * 1000)
    const decided = await steer.decision(requestId, AbortSignal.any([signal, stop(), timeout]))
    if (!decided) {
      // Cancelled or interrupted while waiting: the run ends; the request closes with it.
      if (!timeout.aborted) return { behavior: 'deny', message: 'The run was stopped before anyone decided.' }
      const message = `No one decided on this ${tool} call within ${timeoutS} s, so it was denied. Do not retry it; continue another way or stop.`
      emit({ type: 'permission_decision', request_id: requestId, decision: 'deny', message, by: 'timeout' })
      return { behavior: 'deny', message }
    }
    const replaced = decided.decision === 'allow' ? decided.input : undefined
    const event: PermissionDecision = {
      type: 'permission_decision',
      request_id: requestId,
      decision: decided.decision,
      message: decided.message ?? null,
      by: 'caller',
    }
    if (replaced) {
      event.input = replaced
      event.original_input = toolInput
    }
    emit(event)
    if (decided.decision === 'allow') {
      if (replaced) ran?.(toolUseID, replaced)
      return { behavior: 'allow', updatedInput: replaced ?? toolInput }
    }
    return {
      behavior: 'deny',
      message: decided.message
        ? `A person denied this ${tool} call: ${decided.message}`
        : `A person denied this ${tool} call.`,
    }
  }
}

/**
 * A `PreToolUse` hook that answers `ask` for every call a `require_approval` rule matches.
 * In `default` mode Claude Code runs read-only tools (Read, Glob, Grep in the workspace)
 * without consulting `canUseTool`; the hook's `ask` sends those calls to the gate too, so
 * a rule on any tool holds.
 *
 * @example
 * ```ts
 * options.hooks = { PreToolUse: [askForRules(input.require_approval)] }
 * ```
 */
export function askForRules(rules: readonly string[]): HookCallbackMatcher {
  return {
    hooks: [
      async (hook) => {
        if (hook.hook_event_name !== 'PreToolUse') return {}
        const toolInput = (hook.tool_input ?? {}) as Record<string, unknown>
        if (!firstMatch(rules, hook.tool_name, toolInput)) return {}
        return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'ask' } }
      },
    ],
  }
}
