import type { CanUseTool, PermissionResult } from '@anthropic-ai/claude-agent-sdk'
import { newId, type RunnerEvent, type RunnerInput } from '@berth/contract'
import { firstMatch } from './rules.js'
import type { Steering } from './steer.js'

/** How long a permission request waits for a decision when the input sets no `approval_timeout_s`. */
export const DEFAULT_APPROVAL_TIMEOUT_S = 900

/** What the model is told about a tool outside `allowed_tools`, as `dontAsk` would deny it. */
export const NOT_ALLOWED = 'This tool is not allowed for this task (not in its allowed tools).'

/**
 * The SDK's `canUseTool` for a run with `require_approval`. A call matching a rule writes
 * `permission_request`, waits for the `decision` control line with its id (or denies at
 * `approval_timeout_s`) and writes `permission_decision`; the denial's message reaches the
 * model as the tool's result, so the agent can go another way. A call matching no rule
 * is allowed when `allowed_tools` covers it and denied otherwise, as `dontAsk` does.
 *
 * @example
 * ```ts
 * options.canUseTool = approvalGate(input, steer, emit)
 * ```
 */
export function approvalGate(input: RunnerInput, steer: Steering, emit: (e: RunnerEvent) => void): CanUseTool {
  const rules = input.require_approval ?? []
  const timeoutS = input.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S
  return async (tool, toolInput, { signal }): Promise<PermissionResult> => {
    if (!firstMatch(rules, tool, toolInput)) {
      if (firstMatch(input.allowed_tools, tool, toolInput)) return { behavior: 'allow', updatedInput: toolInput }
      return { behavior: 'deny', message: NOT_ALLOWED }
    }
    const requestId = newId('approval')
    emit({ type: 'permission_request', request_id: requestId, tool, input: toolInput })
    const timeout = AbortSignal.timeout(timeoutS * 1000)
    const decided = await steer.decision(requestId, AbortSignal.any([signal, timeout]))
    if (!decided) {
      const message = timeout.aborted
        ? `No one decided on this ${tool} call within ${timeoutS} s, so it was denied. Do not retry it; continue another way or stop.`
        : 'The run was cancelled before anyone decided on this tool call.'
      emit({ type: 'permission_decision', request_id: requestId, decision: 'deny', message, by: 'timeout' })
      return { behavior: 'deny', message }
    }
    emit({
      type: 'permission_decision',
      request_id: requestId,
      decision: decided.decision,
      message: decided.message ?? null,
      by: 'caller',
    })
    if (decided.decision === 'allow') return { behavior: 'allow', updatedInput: decided.input ?? toolInput }
    return {
      behavior: 'deny',
      message: decided.message
        ? `A person denied this ${tool} call: ${decided.message}`
        : `A person denied this ${tool} call.`,
    }
  }
}
