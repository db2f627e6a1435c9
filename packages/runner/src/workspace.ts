import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { RunnerInput } from '@berth/contract'

/**
 * The SDK's config dir (sessions, transcripts, its own settings) inside the workspace, so
 * a new container that mounts the same workspace can `resume` a session. Claude Code keys
 * transcripts by the working directory's path, so the workspace must be mounted at the
 * same path (`/workspace`) each time.
 *
 * @example
 * ```ts
 * configDir('/workspace') // '/workspace/.berth/claude'
 * ```
 */
export function configDir(cwd: string): string {
  return join(cwd, '.berth', 'claude')
}

/** A skill name safe as one directory name. */
function skillDir(name: string): string {
  const safe = name
    .trim()
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^\.+/, '')
  if (!safe) throw new Error(`invalid skill name "${name}"`)
  return safe
}

function frontMatterValue(s: string): string {
  return JSON.stringify(s.replace(/\s+/g, ' ').trim())
}

/**
 * Write each skill to `<cwd>/.claude/skills/<name>/SKILL.md` (front matter `name` and
 * `description`, then the body) and return the names to enable. The SDK finds them
 * through the `project` setting source.
 *
 * @example
 * ```ts
 * writeSkills('/workspace', [{ name: 'greet', description: 'Greets', body: 'Say hi.' }]) // ['greet']
 * ```
 */
export function writeSkills(cwd: string, skills: RunnerInput['skills']): string[] {
  return skills.map((skill) => {
    const name = skillDir(skill.name)
    const dir = join(cwd, '.claude', 'skills', name)
    mkdirSync(dir, { recursive: true })
    const text = `---\nname: ${name}\ndescription: ${frontMatterValue(skill.description)}\n---\n\n${skill.body.trimEnd()}\n`
    writeFileSync(join(dir, 'SKILL.md'), text)
    return name
  })
}

/**
 * What the runner appends to Claude Code's system prompt: the profile's CLAUDE.md, then a
 * Memory section with one entry per memory row (most important first).
 *
 * @example
 * ```ts
 * systemAppend({ claude_md: 'Be terse.', memory: [{ type: 'fact', name: 'tz', body: 'UTC' }] })
 * // 'Be terse.\n\n# Memory\n\n## tz (fact)\nUTC'
 * ```
 */
export function systemAppend(input: Pick<RunnerInput, 'claude_md' | 'memory'>): string {
  const parts: string[] = []
  if (input.claude_md.trim()) parts.push(input.claude_md.trim())
  if (input.memory.length) {
    const rows = input.memory.map((m) => `## ${m.name} (${m.type})\n${m.body.trim()}`)
    parts.push(['# Memory', ...rows].join('\n\n'))
  }
  return parts.join('\n\n')
}
