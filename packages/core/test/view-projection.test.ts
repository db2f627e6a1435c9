// `toView` copies a record through its response schema compiled once (records/project.ts)
// instead of a valibot parse per read. For every response schema of the route table and
// every object schema the contract exports: a record of the schema's types reads exactly as
// valibot's parse reads it (same keys, same order, same defaults), and a key the schema does
// not list, at any depth, never reaches the view, whatever the record holds.
import * as contract from '@berth/contract'
import * as v from 'valibot'
import { describe, expect, it } from 'vitest'
import { projection } from '../src/records/project.js'
import { toView } from '../src/records/view.js'

type Node = v.GenericSchema & Record<string, unknown>
const SECRET = 'UNDECLARED-SECRET'

/** A value of `schema`'s types (validation actions aside), with an undeclared key in every object. */
function sample(schema: Node, seed: number, depth = 0): unknown {
  const pick = (n: number) => (seed + depth) % n
  const type = schema.type as string
  switch (type) {
    case 'string':
      return 'text'
    case 'number':
      return 3
    case 'boolean':
      return pick(2) === 0
    case 'null':
      return null
    case 'literal':
      return schema.literal
    case 'picklist':
    case 'enum':
      return (schema.options as unknown[])[pick((schema.options as unknown[]).length)]
    case 'unknown':
    case 'any':
      return { nested: { deep: [1, 'two'] } }
    case 'optional':
    case 'exact_optional':
    case 'undefinedable':
      return pick(3) === 0 ? undefined : sample(schema.wrapped as Node, seed, depth + 1)
    case 'nullable':
    case 'nullish':
      return pick(3) === 0 ? null : sample(schema.wrapped as Node, seed, depth + 1)
    case 'array':
      return depth > 6 ? [] : [0, 1].map((i) => sample(schema.item as Node, seed + i, depth + 1))
    case 'record':
      // A record's keys are all declared: any key may hold a value of its schema.
      return { a: sample(schema.value as Node, seed, depth + 1) }
    case 'union':
    case 'variant': {
      const options = schema.options as Node[]
      return sample(options[pick(options.length)]!, seed, depth + 1)
    }
    case 'intersect':
      return Object.assign({}, ...(schema.options as Node[]).map((o) => sample(o, seed, depth + 1)))
    case 'object':
    case 'strict_object':
    case 'loose_object':
    case 'object_with_rest': {
      // A plain object drops what it does not list; strict ones refuse it, loose ones keep it.
      const out: Record<string, unknown> = type === 'object' ? { leaked: SECRET } : {}
      for (const [key, entry] of Object.entries(schema.entries as Record<string, Node>)) {
        const value = sample(entry, seed + key.length, depth + 1)
        // An optional left out, now and then: absent, not undefined.
        if (value !== undefined || pick(2) === 0) out[key] = value
      }
      return out
    }
    default:
      return undefined
  }
}

const objectSchemas = new Map<string, Node>()
for (const [name, value] of Object.entries(contract)) {
  const s = value as Node
  if (s && typeof s === 'object' && s.kind === 'schema' && s.type === 'object') objectSchemas.set(name, s)
}
for (const route of Object.values(contract.routes) as { name: string; response?: Node }[]) {
  if (route.response?.type === 'object') objectSchemas.set(`response of ${route.name}`, route.response)
}

describe('toView through the compiled projection', () => {
  it('covers the contract: dozens of response and object schemas', () => {
    expect(objectSchemas.size).toBeGreaterThan(50)
    expect(objectSchemas.has('Task') && objectSchemas.has('Workspace')).toBe(true)
  })

  for (const [name, schema] of objectSchemas) {
    it(`${name}: reads as valibot parses it and carries no undeclared key`, () => {
      let typed = 0
      for (let seed = 0; seed < 6; seed++) {
        const record = sample(schema, seed) as object
        // Valibot's own output, validation actions aside (the samples do not match every pattern).
        const run = schema['~run']({ value: record }, { abortEarly: false, abortPipeEarly: false })
        const state = { ok: true }
        const projected = projection(schema)(record, state)
        expect(JSON.stringify(projected)).not.toContain(SECRET)
        if (!run.typed) continue
        typed++
        expect(state.ok).toBe(true)
        expect(JSON.stringify(projected)).toBe(JSON.stringify(run.value))
        expect(projected).toEqual(run.value)
      }
      // Most samples are of the schema's types: the comparison above ran.
      expect(typed).toBeGreaterThan(0)
    })
  }

  it('a record that passes the schema reads exactly as v.parse reads it, extra fields winning', () => {
    const at = '2026-01-01T00:00:00.000Z'
    const task = {
      id: contract.newId('task'),
      owner_id: 'usr_1',
      instance_id: 'host-a',
      status: 'completed',
      mode: 'batch',
      profile_id: contract.newId('profile'),
      priority: 'normal',
      prompt: 'Hi',
      session_id: null,
      workspace_id: contract.newId('workspace'),
      created_at: at,
      started_at: at,
      finished_at: at,
      result: {
        text: 'ok',
        tool_calls: [{ id: 't1', name: 'Bash', input: { command: 'ls' }, runner_pid: 7 }],
        input_tokens: 1,
        output_tokens: 2,
        cost_usd: 0.1,
        turns: 1,
        hidden_cost: 9,
      },
      error: null,
      rewound_at: null,
      pending_approvals: 0,
      waiting: null,
    }
    const extra = { task_id: task.id, waiting: null }
    const parsed = v.parse(contract.Task, { ...task, ...extra })
    expect(JSON.stringify(toView(contract.Task, task, extra))).toBe(JSON.stringify(parsed))
    expect(JSON.stringify(parsed)).not.toMatch(/runner_pid|hidden_cost|instance_id|owner_id/)
  })

  it('a value of the wrong type never carries its keys into the view', () => {
    const Item = v.object({
      name: v.string(),
      inner: v.nullable(v.object({ a: v.number() })),
      tags: v.array(v.string()),
    })
    // An object where a string is declared, an array where an object is, objects in a string list.
    const record = {
      name: { secret: SECRET },
      inner: [{ secret: SECRET }],
      tags: ['ok', { secret: SECRET }],
      secret: SECRET,
    }
    const view = toView(Item, record)
    expect(JSON.stringify(view)).not.toContain(SECRET)
    expect(view.tags[0]).toBe('ok')
  })
})
