/** valibot → JSON Schema for the document: named schemas as `$ref`s into `components.schemas`, one form per direction. */
import type * as v from 'valibot'
import {
  toJsonSchema,
  toJsonSchemaDefs,
  type ConversionConfig,
  type JsonSchema,
  type OverrideActionContext,
} from '@valibot/to-json-schema'
import { documentedSchemas } from '@berth/contract'

/** Where named schemas live in the document. */
export const SCHEMA_REF = '#/components/schemas/'
/** Marks `v.unknown()`/`v.any()`: an intended "any value", never a silently lost type. */
export const ANY_VALUE_DESCRIPTION = 'Any JSON value.'

/** Types worth a name of their own in `components.schemas` (primitives stay inline). */
const NAMED_TYPES = new Set([
  'object',
  'strict_object',
  'loose_object',
  'object_with_rest',
  'variant',
  'picklist',
  'enum',
])

/**
 * The named schemas of the contract: each object, variant or enum schema of its `schemas/`, under
 * its export name without a `Schema` suffix.
 *
 * @example
 * ```ts
 * defaultSchemaComponents().Profile === Profile // true
 * ```
 */
export function defaultSchemaComponents(): Record<string, v.GenericSchema> {
  const out: Record<string, v.GenericSchema> = {}
  const seen = new Set<unknown>()
  for (const [name, value] of Object.entries(documentedSchemas).sort(([a], [b]) => a.localeCompare(b))) {
    const s = value as Partial<v.GenericSchema> | null
    if (typeof s !== 'object' || s === null || s.kind !== 'schema' || !NAMED_TYPES.has(s.type ?? '') || seen.has(s))
      continue
    seen.add(s)
    out[name.replace(/Schema$/, '')] = s as v.GenericSchema
  }
  return out
}

function describe(schema: JsonSchema, text: string): JsonSchema {
  return { ...schema, description: schema.description ? `${schema.description} ${text}` : text }
}

/**
 * Actions JSON Schema cannot state exactly. Each is handled on purpose (no `errorMode:
 * 'ignore'`), so an action nobody thought about still fails the build loudly.
 */
function overrideAction({ valibotAction: action, jsonSchema, errors }: OverrideActionContext): JsonSchema | undefined {
  switch (action.type) {
    // Trimming happens before the length checks; the schema of the trimmed value is the same.
    case 'trim':
    case 'trim_start':
    case 'trim_end':
      return jsonSchema
    case 'check': {
      const message = (action as { message?: unknown }).message
      return describe(
        jsonSchema,
        typeof message === 'string' ? `Also checked: ${message}.` : 'Also checked by the server.',
      )
    }
    case 'regex': {
      if (!errors) return undefined
      const re = (action as unknown as { requirement: RegExp }).requirement
      // The converter sets `pattern` only when none was there, and reports a clash otherwise.
      const hadPattern = errors.some((e) => e.includes('combination'))
      const out = { ...jsonSchema }
      if (/[imsv]/.test(re.flags)) {
        // Flags change the meaning; say it in words rather than publish a wrong pattern.
        if (!hadPattern) delete out.pattern
        return describe(out, `Must match /${re.source}/${re.flags}.`)
      }
      if (hadPattern) out.allOf = [...(out.allOf ?? []), { pattern: re.source }]
      return out
    }
    default:
      return undefined
  }
}

/** `v.unknown()` and `v.any()` carry a description, so an untyped `{}` is always a bug. */
function overrideSchema({
  valibotSchema,
  jsonSchema,
}: {
  valibotSchema: { type: string }
  jsonSchema: JsonSchema
}): JsonSchema | undefined {
  if (valibotSchema.type === 'unknown' || valibotSchema.type === 'any')
    return { ...jsonSchema, description: ANY_VALUE_DESCRIPTION }
  return undefined
}

/** Drop what a standalone JSON Schema carries but an embedded one must not, and empty `required`. */
function tidy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(tidy)
  if (typeof schema !== 'object' || schema === null) return schema
  const out: Record<string, unknown> = {}
  for (const [k, val] of Object.entries(schema)) {
    if (k === '$schema' || k === '$defs') continue
    if (k === 'required' && Array.isArray(val) && val.length === 0) continue
    out[k] = tidy(val)
  }
  return out
}

/** Requests convert in `input` mode, responses in `output` mode. */
export type Mode = 'input' | 'output'

/**
 * valibot → JSON Schema with named schemas as `$ref`s into `components.schemas`. Requests
 * convert in `input` mode, responses in `output` mode; a named schema whose two forms differ
 * (a type-changing pipe) is published twice, the request form as `<Name>Input`.
 */
export function createConverter(named: Record<string, v.GenericSchema>) {
  const names = Object.keys(named)
  let inputVariants = new Set<string>()

  const config = (mode: Mode): ConversionConfig => ({
    target: 'draft-2020-12',
    typeMode: mode,
    errorMode: 'throw',
    definitions: named,
    overrideAction,
    overrideSchema,
    overrideRef: ({ referenceId }) => {
      if (!(referenceId in named)) {
        throw new Error(`a recursive (lazy) schema needs a name: add it to the named schemas (got "${referenceId}")`)
      }
      return `${SCHEMA_REF}${mode === 'input' && inputVariants.has(referenceId) ? `${referenceId}Input` : referenceId}`
    },
  })

  const defs = (mode: Mode): Record<string, JsonSchema> => {
    const { definitions: _d, ...rest } = config(mode)
    return toJsonSchemaDefs(named, rest)
  }

  // A named schema differs between modes when its own pipes do or when it refers to one that
  // does; iterate until the set stops growing (at most once per name).
  let output = defs('output')
  let input = defs('input')
  for (let i = 0; i <= names.length; i++) {
    const differ = new Set(names.filter((n) => JSON.stringify(input[n]) !== JSON.stringify(output[n])))
    if (differ.size === inputVariants.size) break
    inputVariants = differ
    output = defs('output')
    input = defs('input')
  }

  const components: Record<string, JsonSchema> = {}
  for (const n of names) components[n] = tidy(output[n]) as JsonSchema
  for (const n of inputVariants) {
    if (`${n}Input` in named) throw new Error(`schema name clash: ${n}Input`)
    components[`${n}Input`] = tidy(input[n]) as JsonSchema
  }

  return {
    components,
    convert(schema: v.GenericSchema, mode: Mode): JsonSchema {
      return tidy(toJsonSchema(schema as Parameters<typeof toJsonSchema>[0], config(mode))) as JsonSchema
    },
  }
}

/** The converter of one document: its named components and `convert` for any route schema. */
export type Converter = ReturnType<typeof createConverter>
