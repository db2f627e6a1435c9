import MailComposer from 'nodemailer/lib/mail-composer'

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
 * A single-part plain-text RFC 2822 / MIME message with CRLF line ends, composed by
 * nodemailer's MailComposer: `From`, `To`, `Subject` (RFC 2047 when needed), `Date`,
 * `Message-ID`, the extra headers, and the text body in base64 (any characters survive
 * any transport).
 *
 * @example
 * ```ts
 * const raw = await mailMessage({ from: 'ada@example.com', to: ['ops@example.com'], subject: 'Hi', text: 'Hello', date: new Date() })
 * raw.toString('base64url') // the `raw` of a send API
 * ```
 */
export async function mailMessage(m: MailMessageInput): Promise<Buffer> {
  const headers = Object.fromEntries(
    Object.entries(m.headers ?? {}).map(([k, val]) => [k.replace(/[^A-Za-z0-9-]/g, ''), clean(val)]),
  )
  const composer = new MailComposer({
    from: clean(m.from, 254),
    to: m.to.map((a) => clean(a, 254)),
    subject: clean(m.subject),
    text: m.text,
    textEncoding: 'base64',
    date: m.date,
    messageId: m.messageId ? `<${clean(m.messageId, 200).replace(/[<>]/g, '')}>` : undefined,
    headers,
  })
  return composer.compile().build()
}
