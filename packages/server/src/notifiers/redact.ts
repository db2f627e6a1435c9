/** Secrets out of third parties' words: a provider may echo a request (its token, its credentials) in an error. */

const MASK = '••••••••'

/**
 * `text` with every secret masked, as sent and base64-encoded (bearer tokens, SMTP `AUTH`
 * arguments). Empty and very short values are left alone (they would mask ordinary words).
 *
 * @example
 * ```ts
 * redact('invalid token xoxb-123456', ['xoxb-123456']) // 'invalid token ••••••••'
 * ```
 */
export function redact(text: string, secrets: readonly (string | null | undefined)[]): string {
  let out = text
  for (const s of secrets) {
    if (!s || s.length < 6) continue
    for (const form of [s, Buffer.from(s).toString('base64'), Buffer.from(s).toString('base64url')])
      out = out.split(form).join(MASK)
  }
  return out
}
