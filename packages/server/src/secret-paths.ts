import type { AnyRoute, Logger } from '@berth/core'

/**
 * A logger that writes `[redacted]` for the `:secret` segment of any logged `path` (the
 * playbook webhook URL carries its credential in the path, and request lines log paths).
 *
 * @example
 * ```ts
 * const log = redactSecretPaths(jsonLogger(), routes)
 * log.info('request', { path: '/api/playbooks/pb_1/webhook/whsec_abc' }) // path: '/api/playbooks/pb_1/webhook/[redacted]'
 * ```
 */
export function redactSecretPaths(logger: Logger, routes: readonly AnyRoute[]): Logger {
  const patterns = routes
    .filter((r) => r.path.split('/').includes(':secret'))
    .map((r) => {
      const segments = r.path.split('/')
      return { re: new RegExp(`^${segments.map((s) => (s.startsWith(':') ? '[^/]*' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}/?$`), at: segments.indexOf(':secret') }
    })
  const redact = (fields?: Record<string, unknown>) => {
    const path = fields?.path
    if (typeof path !== 'string') return fields
    const hit = patterns.find((p) => p.re.test(path))
    if (!hit) return fields
    const parts = path.split('/')
    parts[hit.at] = '[redacted]'
    return { ...fields, path: parts.join('/') }
  }
  return {
    info: (msg, fields) => logger.info(msg, redact(fields)),
    warn: (msg, fields) => logger.warn(msg, redact(fields)),
    error: (msg, fields) => logger.error(msg, redact(fields)),
  }
}
