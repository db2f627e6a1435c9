/**
 * A small JSON Schema checker for the answer of a run with `output_schema`: the SDK
 * already validates its structured output, this checks the value once more before Berth
 * calls it the task's `structured_output`. It knows the keywords answers use (types,
 * properties, required, additionalProperties, items, enum, const, bounds, lengths,
 * pattern, allOf/anyOf/oneOf/not); others are not checked.
 */

type Schema = Record<string, unknown> | boolean

function typeOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number'
  return typeof value
}

function typeOk(want: unknown, value: unknown): boolean {
  const types = Array.isArray(want) ? want : [want]
  const got = typeOf(value)
  return types.some((t) => t === got || (t === 'number' && got === 'integer'))
}

const num = (x: unknown): x is number => typeof x === 'number'

function equal(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b)
}

function check(schema: Schema, value: unknown, path: string, out: string[]): void {
  if (schema === true) return
  if (schema === false) {
    out.push(`${path}: no value is allowed here`)
    return
  }
  const s = schema
  if (s.type !== undefined && !typeOk(s.type, value))
    out.push(`${path}: expected ${String(s.type)}, got ${typeOf(value)}`)
  if (Array.isArray(s.enum) && !s.enum.some((e) => equal(e, value))) out.push(`${path}: not one of the enum values`)
  if ('const' in s && !equal(s.const, value)) out.push(`${path}: not the constant ${JSON.stringify(s.const)}`)
  if (typeof value === 'number') {
    if (num(s.minimum) && value < s.minimum) out.push(`${path}: below the minimum ${s.minimum}`)
    if (num(s.maximum) && value > s.maximum) out.push(`${path}: above the maximum ${s.maximum}`)
    if (num(s.exclusiveMinimum) && value <= s.exclusiveMinimum) out.push(`${path}: not above ${s.exclusiveMinimum}`)
    if (num(s.exclusiveMaximum) && value >= s.exclusiveMaximum) out.push(`${path}: not below ${s.exclusiveMaximum}`)
  }
  if (typeof value === 'string') {
    const length = [...value].length
    if (num(s.minLength) && length < s.minLength) out.push(`${path}: shorter than ${s.minLength}`)
    if (num(s.maxLength) && length > s.maxLength) out.push(`${path}: longer than ${s.maxLength}`)
    if (typeof s.pattern === 'string' && !new RegExp(s.pattern, 'u').test(value))
      out.push(`${path}: does not match ${s.pattern}`)
  }
  if (Array.isArray(value)) {
    if (num(s.minItems) && value.length < s.minItems) out.push(`${path}: fewer than ${s.minItems} items`)
    if (num(s.maxItems) && value.length > s.maxItems) out.push(`${path}: more than ${s.maxItems} items`)
    if (s.items !== undefined && !Array.isArray(s.items))
      for (const [i, item] of value.entries()) check(s.items as Schema, item, `${path}[${i}]`, out)
  }
  if (typeOf(value) === 'object') {
    const obj = value as Record<string, unknown>
    const props = (s.properties ?? {}) as Record<string, Schema>
    for (const key of Array.isArray(s.required) ? (s.required as string[]) : [])
      if (!(key in obj)) out.push(`${path}: missing required property "${key}"`)
    for (const [key, v] of Object.entries(obj)) {
      if (key in props) check(props[key]!, v, `${path}.${key}`, out)
      else if (s.additionalProperties !== undefined) check(s.additionalProperties as Schema, v, `${path}.${key}`, out)
    }
  }
  if (Array.isArray(s.allOf)) for (const sub of s.allOf) check(sub as Schema, value, path, out)
  const passes = (sub: unknown) => {
    const errs: string[] = []
    check(sub as Schema, value, path, errs)
    return errs.length === 0
  }
  if (Array.isArray(s.anyOf) && !s.anyOf.some(passes)) out.push(`${path}: matches none of anyOf`)
  if (Array.isArray(s.oneOf) && s.oneOf.filter(passes).length !== 1)
    out.push(`${path}: does not match exactly one of oneOf`)
  if (s.not !== undefined && passes(s.not)) out.push(`${path}: matches the schema under "not"`)
}

/**
 * The ways `value` breaks `schema` (empty: valid), each with its path (`$` the root).
 *
 * @example
 * ```ts
 * schemaErrors({ type: 'object', required: ['n'] }, {}) // ['$: missing required property "n"']
 * ```
 */
export function schemaErrors(schema: Record<string, unknown>, value: unknown): string[] {
  const out: string[] = []
  check(schema, value, '$', out)
  return out
}
