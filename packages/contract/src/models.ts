/** Model ids and the patterns that name them (credentials' `allowed_models`, the price table's rows). */

/**
 * True when `model` matches one of the patterns (`*` matches any run of characters), or
 * when there is no allow-list (`null`).
 *
 * @example
 * ```ts
 * modelAllowed('claude-sonnet-4-5', ['claude-sonnet-*']) // true
 * ```
 */
export function modelAllowed(model: string, patterns: readonly string[] | null): boolean {
  if (patterns === null) return true
  return patterns.some((p) => {
    const re = new RegExp(
      `^${p
        .split('*')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    )
    return re.test(model)
  })
}
