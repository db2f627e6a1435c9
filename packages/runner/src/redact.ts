import { secretForms } from '@berth/contract'

/** What a redacted value is replaced with. */
export const REDACTED = '[REDACTED]'

/** Replaces secret values in strings and JSON-like values. */
export interface Redactor {
  /** The text with every occurrence of every secret replaced. */
  text(s: string): string
  /** A deep copy of a JSON-like value with every string (keys too) redacted. */
  value<T>(v: T): T
  /** A streaming redactor for text that arrives in pieces (token deltas). */
  stream(): StreamRedactor
}

/** Redacts text split across chunks: holds back a tail that could start a secret. */
export interface StreamRedactor {
  /** Feed a chunk; returns the text safe to emit now (maybe ''). */
  push(chunk: string): string
  /** Everything held back, redacted. Call at the end of a run of chunks. */
  flush(): string
}

/**
 * A redactor for the given secret values (empty values are ignored; longer values are
 * replaced first, so a secret containing another is replaced whole). Each secret's
 * base64, URL-encoded and JSON-escaped forms are replaced too (see `secretForms`).
 *
 * @example
 * ```ts
 * const r = createRedactor(['s3cret'])
 * r.text('pw=s3cret') // 'pw=[REDACTED]'
 * const s = r.stream(); s.push('pw=s3') + s.push('cret!') + s.flush() // 'pw=[REDACTED]!'
 * ```
 */
export function createRedactor(secrets: readonly string[]): Redactor {
  const values = [...new Set(secrets.filter((s) => s.length > 0).flatMap(secretForms))].sort(
    (a, b) => b.length - a.length,
  )
  const text = (s: string): string => {
    if (values.length === 0 || s.length === 0) return s
    let out = s
    for (const v of values) if (out.includes(v)) out = out.split(v).join(REDACTED)
    return out
  }
  const value = <T>(v: T): T => {
    if (typeof v === 'string') return text(v) as T
    if (Array.isArray(v)) return v.map(value) as T
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [text(k), value(x)])) as T
    }
    return v
  }
  /** Length of the longest suffix of `s` that is a proper prefix of some secret. */
  const heldTail = (s: string): number => {
    let best = 0
    for (const v of values) {
      for (let k = Math.min(v.length - 1, s.length); k > best; k--) {
        if (s.endsWith(v.slice(0, k))) {
          best = k
          break
        }
      }
    }
    return best
  }
  const stream = (): StreamRedactor => {
    let held = ''
    return {
      push(chunk) {
        const buf = text(held + chunk)
        const keep = heldTail(buf)
        held = buf.slice(buf.length - keep)
        return buf.slice(0, buf.length - keep)
      },
      flush() {
        const out = text(held)
        held = ''
        return out
      },
    }
  }
  return { text, value, stream }
}
