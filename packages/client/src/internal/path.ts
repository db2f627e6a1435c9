/**
 * Fill a route path's `:name` segments from `params`, each URL-encoded, so an id can
 * never change which route is called (`a/b` becomes `a%2Fb`).
 *
 * @example
 * ```ts
 * fillPath('/v1/profiles/:id', { id: 'prof_1' }) // '/v1/profiles/prof_1'
 * ```
 */
export function fillPath(template: string, params: Record<string, unknown> | undefined): string {
  return template.replace(/:([A-Za-z0-9_]+)/g, (_, key: string) => {
    const value = params?.[key]
    // An empty segment would silently address another route (`/v1/profiles/` is the list).
    if (value === undefined || value === null || value === '') {
      throw new TypeError(`Missing path parameter "${key}" for ${template}`)
    }
    return encodeURIComponent(String(value))
  })
}
