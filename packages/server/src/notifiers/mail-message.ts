/** What {@link mailMessage} builds a message from. */
export interface MailMessageInput {
  from: string
  to: string[]
  subject: string
  text: string
  date: Date
  /** Without angle brackets, e.g. `ntf_abc@berth`. */
  messageId?: string
  /** Extra headers, e.g. `X-Berth-Event`. */
  headers?: Record<string, string>
}

/** Header values never carry line breaks (no header injection), and stay bounded. */
const clean = (value: string, max = 900) => value.replace(/[\r\n\u0000]+/g, ' ').slice(0, max)

/**
 * A header value as RFC 2047 encoded words (`=?UTF-8?B?…?=`) when it is not plain ASCII,
 * folded so no encoded word exceeds 75 characters.
 *
 * @example
 * ```ts
 * encodeHeader('Berth: task done') // 'Berth: task done'
 * encodeHeader('Bérth ✓')          // '=?UTF-8?B?QsOpcnRoIOKckw==?='
 * ```
 */
export function encodeHeader(value: string): string {
  const v = clean(value)
  if (/^[\x20-\x7e]*$/.test(v)) return v
  const words: string[] = []
  let chunk = ''
  for (const ch of v) {
    // 45 bytes of UTF-8 → 60 base64 characters: the word stays within 75.
    if (Buffer.byteLength(chunk + ch) > 45) {
      words.push(chunk)
      chunk = ''
    }
    chunk += ch
  }
  if (chunk) words.push(chunk)
  return words.map((w) => `=?UTF-8?B?${Buffer.from(w).toString('base64')}?=`).join('\r\n ')
}

/**
 * A single-part plain-text RFC 2822 / MIME message with CRLF line ends: `From`, `To`,
 * `Subject` (RFC 2047 when needed), `Date`, `Message-ID`, the extra headers, and the text
 * body in base64 (any characters survive any transport).
 *
 * @example
 * ```ts
 * const raw = mailMessage({ from: 'ada@example.com', to: ['ops@example.com'], subject: 'Hi', text: 'Hello', date: new Date() })
 * Buffer.from(raw).toString('base64url') // the `raw` of a send API
 * ```
 */
export function mailMessage(m: MailMessageInput): string {
  const lines = [
    `From: ${clean(m.from, 254)}`,
    `To: ${m.to.map((a) => clean(a, 254)).join(', ')}`,
    `Subject: ${encodeHeader(m.subject)}`,
    `Date: ${m.date.toUTCString().replace(/GMT$/, '+0000')}`,
    ...(m.messageId ? [`Message-ID: <${clean(m.messageId, 200).replace(/[<>]/g, '')}>`] : []),
    ...Object.entries(m.headers ?? {}).map(([k, val]) => `${k.replace(/[^A-Za-z0-9-]/g, '')}: ${encodeHeader(val)}`),
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=UTF-8',
    'Content-Transfer-Encoding: base64',
  ]
  const body = (Buffer.from(m.text, 'utf8').toString('base64').match(/.{1,76}/g) ?? []).join('\r\n')
  return `${lines.join('\r\n')}\r\n\r\n${body}\r\n`
}
