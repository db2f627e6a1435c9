/**
 * Paths are routed as written. A URL parser resolves `..` and `.` segments (encoded ones
 * too) and reads `\` as `/`, so `/v1/tasks/../../admin/users` would reach another route
 * than the one it names; such paths, and empty segments (`//`), are refused before routing.
 */

/** A `.` or `..` segment, its dots written or percent-encoded. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i

/**
 * The path of a request target as the client sent it: origin form (`/a?b`) or absolute
 * form (`http://host/a?b`); `null` for the others (`*`).
 */
function pathOf(target: string): string | null {
  const start = target.startsWith('/') ? 0 : /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target)?.[0].length
  if (start === undefined) return null
  const path = target.slice(start).split(/[?#]/, 1)[0]!
  return path || '/'
}

/**
 * What makes a request target's path one Berth refuses, or `null` for a plain path. A
 * trailing slash is not an empty segment (`/v1/tasks/` is `/v1/tasks`), and the query is
 * not part of the path (`/v1/tasks?x=/../` is plain).
 */
export function pathProblem(target: string): string | null {
  const path = pathOf(target)
  if (path === null) return null
  if (path.includes('\\')) return 'a backslash'
  const segments = path.split('/').slice(1)
  for (const [i, segment] of segments.entries()) {
    if (segment === '' && i < segments.length - 1) return 'an empty segment ("//")'
    if (DOT_SEGMENT.test(segment)) return `a dot segment ("${segment}")`
  }
  return null
}
