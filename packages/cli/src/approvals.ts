import { createInterface } from 'node:readline/promises'
import type { Decision, PermissionRequest } from '@berth/client/node'
import type { ArgsDef } from 'citty'
import { log, oneLine } from './context.js'

/** The flags that say how `berth run` decides permission requests. */
export const approvalArgs = {
  'approve-all': { type: 'boolean', description: 'Allow every permission request without asking' },
  'deny-all': { type: 'boolean', description: 'Deny every permission request without asking' },
  'require-approval': {
    type: 'string',
    description:
      "Tool rules that wait for approval, replacing the profile's (e.g. 'Bash(git push:*)'; comma-separated)",
    valueHint: 'rules',
  },
  'approval-timeout': {
    type: 'string',
    description: 'Seconds a request waits before it is denied (default: the profile’s, else 900)',
    valueHint: 's',
  },
} satisfies ArgsDef

export interface ApprovalFlags {
  'approve-all'?: boolean | undefined
  'deny-all'?: boolean | undefined
}

/** What the terminal needs around a question: stop the spinner before, redraw after. */
export interface PromptHooks {
  before(): void
  after(): void
  /** Ctrl-C at the question. */
  interrupt(): void
  /** Ask on a readline the command already has (`berth sessions`); default: a fresh one on stdin. */
  question?: (prompt: string) => Promise<string>
}

// One question on a readline of its own, closed after (so stdin lets the process exit).
const ask = (input: NodeJS.ReadStream, hooks: PromptHooks) => async (prompt: string) => {
  const rl = createInterface({ input, output: process.stderr, terminal: true })
  // Ctrl-C at the question stops the run; closing the readline lets the process exit.
  rl.on('SIGINT', () => {
    hooks.interrupt()
    rl.close()
  })
  try {
    return await rl.question(prompt)
  } finally {
    rl.close()
  }
}

/**
 * How `berth run` answers a permission request: `--approve-all` and `--deny-all` decide
 * at once; otherwise a terminal is asked `Allow? [y/N]` (one question at a time, in the
 * order the requests came); a stdin that is not a terminal cannot be asked, so the
 * request is denied and the agent told why.
 *
 * @example
 * ```ts
 * const decide = createApprover(args, hooks)
 * await berth.tasks.run(body, { onPermissionRequest: decide })
 * ```
 */
export function createApprover(
  flags: ApprovalFlags,
  hooks: PromptHooks,
  input: NodeJS.ReadStream = process.stdin,
): (request: PermissionRequest) => Promise<Decision> {
  if (flags['approve-all'] && flags['deny-all']) throw new Error('--approve-all and --deny-all cannot be used together')
  const answer = async (request: PermissionRequest): Promise<Decision> => {
    hooks.before()
    try {
      log.log(`? ${request.tool} wants to run: ${oneLine(JSON.stringify(request.input) ?? '', 300)}`)
      if (flags['approve-all']) {
        log.log('  allowed (--approve-all)')
        return 'allow'
      }
      if (flags['deny-all']) {
        log.log('  denied (--deny-all)')
        return { decision: 'deny', message: 'Denied: the caller runs with --deny-all.' }
      }
      if (!input.isTTY) {
        log.warn('  denied: stdin is not a terminal, so no one can answer (use --approve-all or --deny-all)')
        return { decision: 'deny', message: 'Denied: no one was at a terminal to approve it.' }
      }
      const reply = (await (hooks.question ?? ask(input, hooks))('Allow? [y/N] ')).trim().toLowerCase()
      const allow = reply === 'y' || reply === 'yes'
      log.log(allow ? '  allowed' : '  denied')
      return allow ? 'allow' : { decision: 'deny', message: 'The user denied this at the terminal.' }
    } finally {
      hooks.after()
    }
  }
  // Requests are answered one at a time, in the order they came: two never share the terminal.
  let queue: Promise<unknown> = Promise.resolve()
  return (request) => {
    const next = queue.then(() => answer(request))
    queue = next.catch(() => {})
    return next
  }
}

/**
 * The submit fields of `--require-approval` and `--approval-timeout` (left out when not given).
 *
 * @example
 * ```ts
 * const body = { ...(await taskFields(berth, args)), ...approvalFields(args), prompt }
 * ```
 */
export function approvalFields(args: {
  'require-approval'?: string | undefined
  'approval-timeout'?: string | undefined
}): {
  require_approval?: string[]
  approval_timeout_s?: number
} {
  const out: { require_approval?: string[]; approval_timeout_s?: number } = {}
  if (args['require-approval'] !== undefined)
    out.require_approval = args['require-approval']
      .split(',')
      .map((r) => r.trim())
      .filter(Boolean)
  if (args['approval-timeout'] !== undefined) {
    const n = Number(args['approval-timeout'])
    if (!Number.isFinite(n)) throw new Error(`--approval-timeout must be a number, got "${args['approval-timeout']}"`)
    out.approval_timeout_s = n
  }
  return out
}
