/**
 * Tool rules in the Claude Agent SDK's permission syntax, matched against one tool call:
 * `Bash` (any call of the tool), `Bash(git push:*)` (a command starting with `git push`),
 * `Bash(npm test)` (exactly that command), `mcp__pay__*` (a glob on the tool name),
 * `mcp__pay` (every tool of that MCP server), `Write(/workspace/secret/**)` (a file tool
 * on a path glob). The runner uses them for `require_approval` and `allowed_tools`.
 */

/** One parsed rule: a tool-name glob and, optionally, what its parentheses held. */
export interface ToolRule {
  tool: string
  content?: string
}

/** The tools whose rule content is a path glob on `file_path` (or `notebook_path`). */
const FILE_TOOLS = new Set(['Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit'])

/**
 * Parse a rule. Text without parentheses is a tool-name glob; `Tool(content)` adds the
 * content (an empty `Tool()` is the tool alone).
 *
 * @example
 * ```ts
 * parseRule('Bash(git push:*)') // { tool: 'Bash', content: 'git push:*' }
 * ```
 */
export function parseRule(rule: string): ToolRule {
  const m = /^([^()]+)\(([\s\S]*)\)$/.exec(rule.trim())
  if (!m) return { tool: rule.trim() }
  const content = m[2]!.trim()
  return content ? { tool: m[1]!.trim(), content } : { tool: m[1]!.trim() }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
}

/** `*` anything; with `paths`, `*` stops at `/` and `**` crosses it. */
function globRegExp(glob: string, paths = false): RegExp {
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === '*' && glob[i + 1] === '*' && paths) {
      re += '.*'
      i++
    } else if (c === '*') re += paths ? '[^/]*' : '.*'
    else re += escapeRegExp(c)
  }
  return new RegExp(`^${re}$`)
}

/** Does a rule's tool part cover `tool`? A glob, or a bare `mcp__server` for all its tools. */
function toolMatches(ruleTool: string, tool: string): boolean {
  if (globRegExp(ruleTool).test(tool)) return true
  return (
    /^mcp__[^_]+(?:_[^_]+)*$/.test(ruleTool) && !ruleTool.slice(5).includes('__') && tool.startsWith(`${ruleTool}__`)
  )
}

/** The simple commands of a shell line: a prefix rule must not be dodged by `cd x && git push`. */
function subcommands(command: string): string[] {
  return command
    .split(/&&|\|\||[;|\n]/)
    .map((c) => c.trim())
    .filter(Boolean)
}

function bashMatches(content: string, command: string): boolean {
  if (content.endsWith(':*')) {
    const prefix = content.slice(0, -2).trim()
    return subcommands(command).some((c) => c === prefix || c.startsWith(`${prefix} `) || c.startsWith(`${prefix}\t`))
  }
  if (content.includes('*')) return subcommands(command).some((c) => globRegExp(content).test(c))
  return command.trim() === content
}

/**
 * Does `rule` match a call of `tool` with `input`? Content the runner cannot interpret
 * for a tool (e.g. `WebFetch(domain:x)`) matches every call of that tool, so an approval
 * rule errs on asking.
 *
 * @example
 * ```ts
 * ruleMatches('Bash(git push:*)', 'Bash', { command: 'git push origin main' }) // true
 * ruleMatches('Bash(git push:*)', 'Bash', { command: 'git status' }) // false
 * ```
 */
export function ruleMatches(rule: string | ToolRule, tool: string, input: Record<string, unknown>): boolean {
  const r = typeof rule === 'string' ? parseRule(rule) : rule
  if (!toolMatches(r.tool, tool)) return false
  if (r.content === undefined) return true
  if (tool === 'Bash') return typeof input.command === 'string' && bashMatches(r.content, input.command)
  if (FILE_TOOLS.has(tool)) {
    const path = input.file_path ?? input.notebook_path ?? input.path
    return typeof path === 'string' && globRegExp(r.content, true).test(path)
  }
  return true
}

/**
 * The first of `rules` that matches the call, or undefined.
 *
 * @example
 * ```ts
 * firstMatch(['mcp__pay__*', 'Bash'], 'mcp__pay__charge', {}) // 'mcp__pay__*'
 * ```
 */
export function firstMatch(rules: readonly string[], tool: string, input: Record<string, unknown>): string | undefined {
  return rules.find((r) => ruleMatches(r, tool, input))
}

/**
 * `allowed` without the entries that could auto-allow a call some rule in `ask` covers
 * (`Bash` goes when `Bash(git push:*)` must ask): what the SDK may run without asking.
 *
 * @example
 * ```ts
 * autoAllowed(['Bash', 'Read'], ['Bash(git push:*)']) // ['Read']
 * ```
 */
export function autoAllowed(allowed: readonly string[], ask: readonly string[]): string[] {
  const asked = ask.map((r) => parseRule(r).tool)
  return allowed.filter((entry) => {
    const a = parseRule(entry).tool
    return !asked.some((r) => toolMatches(r, a) || toolMatches(a, r) || globRegExp(a).test(r))
  })
}
