/** Label values that stay few: free-form names checked for shape and capped in number. */

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** An HTTP method as a label: the standard ones, else `other`. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : 'other'
}

/**
 * A labeller for a free-form value (a model or provider name): the value itself while it
 * looks like a name and fewer than `max` distinct values were seen, else `other`. Series
 * stay bounded whatever callers send.
 */
export function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>()
  return (value) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,79}$/.test(value)) return 'other'
    if (seen.has(value)) return value
    if (seen.size >= max) return 'other'
    seen.add(value)
    return value
  }
}
