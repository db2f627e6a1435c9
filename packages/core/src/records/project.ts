// A response schema compiled once into a function that copies a record's declared fields:
// the work of a valibot parse that a view needs (keys the schema lists, at every depth,
// defaults, types), without its datasets, issue lists and validation actions. See `toView`.
import type * as v from 'valibot'

/** Set to false by a projection that met a value of the wrong type (or shape) somewhere. */
export interface Projected {
  ok: boolean
}

/** Copies the schema's part of `value`; `extra` (top level only) wins over the value's own keys. */
export type Projection = (value: unknown, state: Projected, extra?: Record<string, unknown>) => unknown

type Node = v.GenericSchema & {
  type: string
  pipe?: readonly { kind: string }[]
  wrapped?: Node
  entries?: Record<string, Node>
  rest?: Node
  item?: Node
  value?: Node
  options?: readonly unknown[]
  literal?: unknown
  default?: unknown
  fallback?: unknown
}

const compiled = new WeakMap<object, Projection>()

/**
 * The projection of `schema`, compiled on its first use and kept for the schema's life.
 *
 * For a value of the schema's types it returns what `v.parse(schema, value)` returns (the same
 * keys in the same order, defaults filled in), without running validation actions (lengths,
 * patterns): the record was checked when it was written. A value of the wrong type marks
 * `state.ok` false; it is copied only where it holds no object, so a projection never
 * carries a key the schema does not list, whatever the value holds. Parts a projection
 * cannot copy faithfully (transformations, intersections, lazy schemas) run through valibot.
 *
 * @example
 * ```ts
 * const state = { ok: true }
 * projection(Task)(record, state, { task_id: record.id }) // only Task's keys
 * ```
 */
export function projection(schema: v.GenericSchema): Projection {
  let fn = compiled.get(schema)
  if (!fn) {
    fn = compile(schema as Node)
    compiled.set(schema, fn)
  }
  return fn
}

/** A value the schema refused: kept unless it holds keys (an object or array), which are never copied unread. */
function refused(value: unknown, state: Projected): unknown {
  state.ok = false
  return value !== null && typeof value === 'object' ? undefined : value
}

function defaultOf(schema: Node): unknown {
  return typeof schema.default === 'function' ? (schema.default as () => unknown)() : schema.default
}

/** Through valibot itself: what the projection does not copy on its own (its types, as everywhere, not its checks). */
function parsed(schema: Node): Projection {
  return (value, state) => {
    const r = (schema as v.GenericSchema)['~run']({ value }, {})
    return r.typed ? r.value : refused(value, state)
  }
}

const EMPTY: Record<string, (value: unknown) => boolean> = {
  optional: (x) => x === undefined,
  exact_optional: (x) => x === undefined,
  undefinedable: (x) => x === undefined,
  nullable: (x) => x === null,
  nullish: (x) => x === null || x === undefined,
}
const PRIMITIVE: Record<string, (value: unknown, schema: Node) => boolean> = {
  string: (x) => typeof x === 'string',
  number: (x) => typeof x === 'number' && !Number.isNaN(x),
  boolean: (x) => typeof x === 'boolean',
  null: (x) => x === null,
  undefined: (x) => x === undefined,
  literal: (x, s) => x === s.literal,
  picklist: (x, s) => s.options!.includes(x),
  enum: (x, s) => s.options!.includes(x),
}

function compile(schema: Node): Projection {
  // A pipe copies as its first schema when the rest only checks; a transformation or a second schema changes the value.
  if (schema.pipe?.slice(1).some((a) => a.kind === 'transformation' || a.kind === 'schema')) return parsed(schema)
  if (schema.fallback !== undefined) return parsed(schema)
  const type = schema.type
  if (type === 'unknown' || type === 'any') return (value) => value
  const check = PRIMITIVE[type]
  if (check) return (value, state) => (check(value, schema) ? value : refused(value, state))
  const empty = EMPTY[type]
  if (empty) {
    const inner = compile(schema.wrapped!)
    return (value, state) => {
      let x = value
      if (empty(x) && schema.default !== undefined) x = defaultOf(schema)
      return empty(x) ? x : inner(x, state)
    }
  }
  if (type === 'object' || type === 'strict_object' || type === 'loose_object' || type === 'object_with_rest')
    return compileObject(schema)
  if (type === 'array') {
    const item = compile(schema.item!)
    return (value, state) => (Array.isArray(value) ? value.map((x) => item(x, state)) : refused(value, state))
  }
  if (type === 'record') {
    const item = compile(schema.value!)
    return (value, state) => {
      if (!value || typeof value !== 'object') return refused(value, state)
      const out: Record<string, unknown> = {}
      for (const k of Object.keys(value)) {
        if (k !== '__proto__' && k !== 'prototype' && k !== 'constructor')
          out[k] = item((value as Record<string, unknown>)[k], state)
      }
      return out
    }
  }
  if (type === 'union' || type === 'variant') {
    // The first option the value fits, as valibot picks it (a variant's keys tell its options apart).
    const options = (schema.options as Node[]).map(compile)
    return (value, state) => {
      for (const option of options) {
        const tried = { ok: true }
        const out = option(value, tried)
        if (tried.ok) return out
      }
      return refused(value, state)
    }
  }
  return parsed(schema)
}

function compileObject(schema: Node): Projection {
  const keys = Object.keys(schema.entries!)
  const entries = keys.map((key) => {
    const s = schema.entries![key]!
    const optional = s.type === 'optional' || s.type === 'exact_optional' || s.type === 'nullish'
    return { key, copy: compile(s), optional, filled: optional && s.default !== undefined, schema: s }
  })
  const declared = new Set(keys)
  const rest =
    schema.type === 'object_with_rest' ? compile(schema.rest!) : schema.type === 'loose_object' ? null : undefined
  return (value, state, extra) => {
    if (!value || typeof value !== 'object') return refused(value, state)
    const input = value as Record<string, unknown>
    const out: Record<string, unknown> = {}
    for (const e of entries) {
      const own = extra !== undefined && e.key in extra
      if (own || e.key in input) out[e.key] = e.copy(own ? extra[e.key] : input[e.key], state)
      else if (e.filled) out[e.key] = e.copy(defaultOf(e.schema), state)
      else if (!e.optional) state.ok = false
    }
    // A loose object keeps its other keys as they are; an object with a rest schema copies them through it.
    if (rest !== undefined) {
      for (const from of extra ? [input, extra] : [input]) {
        for (const k of Object.keys(from)) {
          if (declared.has(k) || k === '__proto__' || k === 'prototype' || k === 'constructor') continue
          out[k] = rest === null ? from[k] : rest(from[k], state)
        }
      }
    }
    return out
  }
}
