/** Encoded fragments shorter than this are not redacted (they would match ordinary text). */
const MIN_FORM = 6

/** Standard base64 of `bytes` behind `offset` filler bytes: only the characters the secret alone decides. */
function base64At(bytes: Uint8Array, offset: 0 | 1 | 2): string {
  const padded = new Uint8Array(offset + bytes.length)
  padded.set(bytes, offset)
  const text = btoa(String.fromCharCode(...padded)).replace(/=+$/, '')
  const total = offset + bytes.length
  // Characters decided by the secret's bytes alone: not the ones mixing in filler before
  // it, nor the last one mixing in whatever follows it.
  const start = [0, 2, 3][offset]!
  const end = Math.floor(total / 3) * 4 + (total % 3)
  return text.slice(start, end)
}

/**
 * The forms a secret may take in an agent's output besides itself: base64 (standard and
 * URL-safe, at each of the three alignments it can have inside a longer encoded text, e.g.
 * `user:secret` in a Basic header), URL-encoded (percent and form encoding) and JSON-escaped.
 * Redaction replaces these too.
 *
 * @example
 * ```ts
 * secretForms('s3cret-value') // ['s3cret-value', 'czNjcmV0LXZhbHVl', ...]
 * ```
 */
export function secretForms(secret: string): string[] {
  if (!secret) return []
  const forms = new Set([secret])
  const bytes = new TextEncoder().encode(secret)
  for (const offset of [0, 1, 2] as const) {
    const b64 = base64At(bytes, offset)
    forms.add(b64)
    forms.add(b64.replace(/\+/g, '-').replace(/\//g, '_'))
  }
  forms.add(encodeURIComponent(secret))
  forms.add(encodeURIComponent(secret).replace(/%20/g, '+'))
  forms.add(new URLSearchParams({ s: secret }).toString().slice(2))
  forms.add(JSON.stringify(secret).slice(1, -1))
  return [...forms].filter((f) => f === secret || f.length >= MIN_FORM)
}
