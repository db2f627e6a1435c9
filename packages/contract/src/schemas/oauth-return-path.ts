import * as v from 'valibot'
import { maxLength } from './length.js'

const BASE = 'https://berth.invalid'

/**
 * Whether `path` is safe to redirect a browser to after an OAuth flow: a path on this
 * server, never another origin. It must start with `/`, hold no `//` anywhere (`//host`
 * is another host, and `/.//host` normalises to it; a query may not hold `//` either),
 * no backslash (`/\host` is read as `//host`), and no whitespace or control character
 * (browsers drop tabs and newlines, turning `/\t/evil.com` into `//evil.com`).
 *
 * @example
 * ```ts
 * isLocalReturnPath('/settings/git?tab=1') // true
 * isLocalReturnPath('//evil.com')          // false
 * isLocalReturnPath('https://evil.com')    // false
 * ```
 */
export function isLocalReturnPath(path: string): boolean {
  if (path.length === 0 || path.length > 2000) return false
  if (path[0] !== '/' || path.includes('//') || path[1] === '\\') return false
  if (/[\\\s\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(path)) return false
  try {
    const url = new URL(path, BASE)
    // `/.//evil.com` normalises to `//evil.com`; with no `//` at all it cannot, but check anyway.
    return url.origin === BASE && !url.pathname.startsWith('//')
  } catch {
    return false
  }
}

/** A `regex` action for the document only: it adds no issue once the value has one. */
function documentedPattern(re: RegExp): v.RegexAction<string, string> {
  const action = v.regex<string, string>(re, 'must be a local path')
  return { ...action, '~run': (dataset, config) => (dataset.issues ? dataset : action['~run'](dataset, config)) }
}

/** A local path to send the browser back to after an OAuth flow (see {@link isLocalReturnPath}). */
export const ReturnPath = v.pipe(
  v.string(),
  maxLength(2000),
  v.check(
    isLocalReturnPath,
    'must be a local path: one leading "/", no "//", scheme, backslash, whitespace or control characters',
  ),
  // The same rule as a pattern, for the OpenAPI document (the check above is the authority).
  // biome-ignore lint/complexity/noUselessEscapeInRegex: the published document keeps this pattern's text as it always was
  documentedPattern(/^\/(?![\/\\])(?!.*\/\/)[^\\\s\u0000-\u001f\u007f-\u009f\u2028\u2029]*$/),
)

/**
 * `returnPath` plus result flags as a relative URL: `/settings?x=1` + `{ git: 'connected' }`
 * → `/settings?x=1&git=connected`. The fragment stays last.
 *
 * @example
 * ```ts
 * withResult('/settings#git', { git: 'error', reason: 'access_denied' }) // '/settings?git=error&reason=access_denied#git'
 * ```
 */
export function withResult(returnPath: string, flags: Record<string, string>): string {
  const url = new URL(returnPath, BASE)
  for (const [k, val] of Object.entries(flags)) url.searchParams.set(k, val)
  return `${url.pathname}${url.search}${url.hash}`
}
