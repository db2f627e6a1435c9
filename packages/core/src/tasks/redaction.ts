/** Redaction on the server's side: secrets (in every form {@link secretForms} knows) out of text a runner left. */
import { secretForms } from '@berth/contract'

/**
 * `text` with every value of `values`, and each of its encoded forms, replaced by
 * `[REDACTED]` (longest first, so a form inside another goes with it).
 *
 * @example
 * ```ts
 * redactAll('token=s3cret-value', ['s3cret-value']) // 'token=[REDACTED]'
 * ```
 */
export function redactAll(text: string, values: string[]): string {
  let out = text
  const forms = [...new Set(values.flatMap(secretForms))].sort((a, b) => b.length - a.length)
  for (const v of forms) if (v) out = out.split(v).join('[REDACTED]')
  return out
}
