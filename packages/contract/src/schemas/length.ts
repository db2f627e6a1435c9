import * as v from 'valibot'

/** Length as JSON Schema counts it: characters (code points) for strings, items for arrays. */
function lengthOf(value: string | readonly unknown[]): number {
  if (typeof value !== 'string') return value.length
  let n = 0
  for (const _ of value) n++
  return n
}

/**
 * valibot's `maxLength`, counting a string's characters (code points, as JSON Schema
 * and the OpenAPI document do) rather than its UTF-16 units. Arrays count items.
 *
 * @example
 * ```ts
 * v.parse(v.pipe(v.string(), maxLength(2)), '😀😀') // ok: two characters
 * ```
 */
export function maxLength<T extends string | unknown[], const R extends number>(
  requirement: R,
  message?: string,
): v.MaxLengthAction<T, R, string | undefined> {
  const action = v.maxLength<T, R, string | undefined>(requirement, message)
  return {
    ...action,
    reference: maxLength as never,
    '~run'(dataset, config) {
      if (dataset.typed && lengthOf(dataset.value) > this.requirement) {
        v._addIssue(this, 'length', dataset, config, { received: `${lengthOf(dataset.value)}` })
      }
      return dataset
    },
  }
}

/**
 * valibot's `minLength`, counting characters (code points) of a string.
 *
 * @example
 * ```ts
 * v.parse(v.pipe(v.string(), minLength(1)), '') // throws
 * ```
 */
export function minLength<T extends string | unknown[], const R extends number>(
  requirement: R,
  message?: string,
): v.MinLengthAction<T, R, string | undefined> {
  const action = v.minLength<T, R, string | undefined>(requirement, message)
  return {
    ...action,
    reference: minLength as never,
    '~run'(dataset, config) {
      if (dataset.typed && lengthOf(dataset.value) < this.requirement) {
        v._addIssue(this, 'length', dataset, config, { received: `${lengthOf(dataset.value)}` })
      }
      return dataset
    },
  }
}
