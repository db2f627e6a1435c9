import { createTransport } from 'nodemailer'
import { defineChannel, type DeliveryOutcome, type OutgoingNotification } from '@berth/core'
import { redact } from './redact.js'

/** The deployment's SMTP server (`createBerth({ smtp })`). */
export interface SmtpOptions {
  host: string
  port: number
  /** TLS from the first byte (port 465). Otherwise STARTTLS is used when the server offers it. */
  secure?: boolean
  auth?: { user: string; pass: string }
  /** The sender, e.g. `"Berth" <berth@example.com>`. */
  from: string
  /** Never upgrade with STARTTLS (a local relay without a certificate). */
  ignoreTLS?: boolean
  /** Refuse to send unless the connection is encrypted. */
  requireTLS?: boolean
}

export interface EmailChannelOptions {
  /** Without it, email deliveries fail (untried) with a clear reason. */
  smtp?: SmtpOptions | undefined
  /** Connect, greeting and idle socket timeouts (default 10 s). */
  timeoutMs?: number
}

/** Connection failures worth another attempt. */
const TRANSIENT = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ECONNREFUSED', 'ECONNRESET', 'EPROTOCOL'])

/**
 * A notification's one-line summary: `Berth: task task_1 completed`, `Berth: playbook run run_1 failed (MODEL_ERROR)`, ...
 * (also the chat and mail provider channels' subject line).
 *
 * @example
 * ```ts
 * subjectOf(notification) // 'Berth: task task_8f3k… completed'
 * ```
 */
export function subjectOf(n: OutgoingNotification): string {
  const p = n.payload as {
    task?: { task_id: string; status: string; error?: { code: string } | null }
    run?: { id: string; status: string; error?: { code: string } | null }
  }
  const code = (p.task ?? p.run)?.error?.code
  const why = code ? ` (${code})` : ''
  if (p.task) return `Berth: task ${p.task.task_id} ${p.task.status}${why}`
  if (p.run) return `Berth: playbook run ${p.run.id} ${p.run.status}${why}`
  return n.event === 'integration.test' ? 'Berth: test notification' : `Berth: ${n.event}`
}

/**
 * A notification as plain text: the summary, the error or result text, and the payload.
 *
 * @example
 * ```ts
 * textOf(notification) // 'task task_8f3k… completed\n\nResult:\n…'
 * ```
 */
export function textOf(n: OutgoingNotification): string {
  const p = n.payload as {
    task?: { result?: { text?: string } | null; error?: { error: string } | null }
    run?: { error?: { error: string } | null }
  }
  const lines = [subjectOf(n).replace(/^Berth: /, ''), '']
  const error = (p.task ?? p.run)?.error?.error
  if (error) lines.push(`Error: ${error}`, '')
  const text = p.task?.result?.text
  if (text) lines.push('Result:', text.slice(0, 4000), '')
  if (n.event === 'integration.test') lines.push('This is a test notification: the integration works.', '')
  lines.push('Payload:', JSON.stringify(n.payload, null, 2))
  return lines.join('\n')
}

/**
 * Email deliveries through the deployment's SMTP server (nodemailer): one mail per
 * notification to the integration's `recipients`, with `X-Berth-Event` and
 * `X-Berth-Delivery` headers. 4xx replies and connection failures are worth a retry; 5xx
 * replies and refused credentials are not.
 *
 * @example
 * ```ts
 * const email = emailChannel({ smtp: { host: 'smtp.example.com', port: 587, from: 'berth@example.com' } })
 * await email.deliver({ recipients: ['ops@example.com'] }, notification)
 * ```
 */
export const emailChannel = defineChannel((opts: EmailChannelOptions) => {
  const smtp = opts.smtp
  const timeout = opts.timeoutMs ?? 10_000
  const transport = smtp
    ? createTransport({
        host: smtp.host,
        port: smtp.port,
        secure: smtp.secure ?? false,
        ...(smtp.auth && { auth: { user: smtp.auth.user, pass: smtp.auth.pass } }),
        ...(smtp.ignoreTLS !== undefined && { ignoreTLS: smtp.ignoreTLS }),
        ...(smtp.requireTLS !== undefined && { requireTLS: smtp.requireTLS }),
        connectionTimeout: timeout,
        greetingTimeout: timeout,
        socketTimeout: timeout,
      })
    : undefined
  // The SMTP password, and the `AUTH PLAIN` argument it travels in: a server may echo them.
  const credentials = smtp?.auth ? [smtp.auth.pass, `\0${smtp.auth.user}\0${smtp.auth.pass}`] : []
  return {
    async deliver(config, n): Promise<DeliveryOutcome> {
      if (!transport || !smtp)
        return {
          ok: false,
          status: null,
          error: 'this server has no SMTP server configured, so it cannot send email',
          retryable: false,
        }
      const recipients = Array.isArray(config.recipients)
        ? config.recipients.filter((r): r is string => typeof r === 'string')
        : []
      if (recipients.length === 0)
        return { ok: false, status: null, error: 'the integration has no recipients', retryable: false }
      try {
        const info = await transport.sendMail({
          from: smtp.from,
          to: recipients,
          subject: subjectOf(n),
          text: textOf(n),
          headers: { 'X-Berth-Event': n.event, 'X-Berth-Delivery': n.notification_id },
        })
        const status = Number(/^\d{3}/.exec(info.response ?? '')?.[0] ?? 250)
        if (info.rejected.length > 0)
          return {
            ok: false,
            status,
            error: `the SMTP server refused ${info.rejected.length} recipient(s)`,
            retryable: false,
          }
        return { ok: true, status }
      } catch (err) {
        const e = err as NodeJS.ErrnoException & { responseCode?: number; permanent?: boolean; response?: string }
        if (e.responseCode) {
          return {
            ok: false,
            status: e.responseCode,
            error: `SMTP ${e.responseCode}: ${redact(e.response ?? e.message, credentials).slice(0, 300)}`,
            retryable: e.permanent === false,
          }
        }
        return {
          ok: false,
          status: null,
          error: redact(`${e.code ?? 'SMTP error'}: ${e.message}`, credentials).slice(0, 300),
          retryable: e.code !== undefined && TRANSIENT.has(e.code),
        }
      }
    },
    close() {
      transport?.close()
    },
  }
})
