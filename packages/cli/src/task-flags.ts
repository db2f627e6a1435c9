import { readFileSync } from 'node:fs'
import type { NodeBerthClient, RunTaskBody } from '@berth/client/node'
import type { ArgsDef } from 'citty'

/** Flags that mirror the submit body. */
export const taskArgs = {
  profile: { type: 'string', alias: 'p', description: 'Profile slug or id', valueHint: 'slug|id', required: true },
  'max-turns': {
    type: 'string',
    description: 'Stop after N agent turns (fails with TURN_LIMIT_EXCEEDED)',
    valueHint: 'n',
  },
  'max-budget': {
    type: 'string',
    description: 'Stop beyond this cost in USD (fails with BUDGET_EXCEEDED)',
    valueHint: 'usd',
  },
  tools: { type: 'string', description: 'Allowed tools, comma-separated (e.g. Bash,Read)', valueHint: 'a,b' },
  priority: { type: 'enum', options: ['low', 'normal', 'high'], description: 'Queue priority' },
  'output-schema': {
    type: 'string',
    description: 'A JSON Schema (a file, or inline JSON) the answer must satisfy; printed as JSON',
    valueHint: 'file|json',
  },
} satisfies ArgsDef

export interface TaskFlagValues {
  profile: string
  'max-turns'?: string | undefined
  'max-budget'?: string | undefined
  tools?: string | undefined
  priority?: string | undefined
  'output-schema'?: string | undefined
}

function number(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isFinite(n)) throw new Error(`--${flag} must be a number, got "${value}"`)
  return n
}

/**
 * A profile id for a slug or an id (`prof_…` is taken as is).
 *
 * @example
 * ```ts
 * const id = await profileId(berth, 'docs')
 * ```
 */
export async function profileId(berth: NodeBerthClient, slugOrId: string): Promise<string> {
  if (slugOrId.startsWith('prof_')) return slugOrId
  for (let page = 1; ; page++) {
    const { profiles, total } = await berth.profiles.list({ query: { page, limit: 100 } })
    const match = profiles.find((p) => p.slug === slugOrId)
    if (match) return match.id
    if (page * 100 >= total || profiles.length === 0)
      throw new Error(`No profile with slug "${slugOrId}" (see: berth profiles ls)`)
  }
}

/**
 * The submit fields from the flags (the server validates the values).
 *
 * @example
 * ```ts
 * const body = { ...(await taskFields(berth, args)), prompt }
 * ```
 */
export async function taskFields(berth: NodeBerthClient, args: TaskFlagValues): Promise<Omit<RunTaskBody, 'prompt'>> {
  return {
    profile_id: await profileId(berth, args.profile),
    max_turns: number('max-turns', args['max-turns']),
    max_budget_usd: number('max-budget', args['max-budget']),
    allowed_tools: args.tools
      ?.split(',')
      .map((t) => t.trim())
      .filter(Boolean),
    priority: args.priority as RunTaskBody['priority'],
    output_schema: outputSchema(args['output-schema']),
  }
}

// Inline when it looks like JSON, else a file's path.
function outputSchema(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined
  const text = value.trim().startsWith('{') ? value : readFileSync(value, 'utf8')
  try {
    return JSON.parse(text) as Record<string, unknown>
  } catch (err) {
    throw new Error(`--output-schema is not JSON: ${(err as Error).message}`)
  }
}
